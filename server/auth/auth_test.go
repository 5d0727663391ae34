package auth

import (
	"errors"
	"net/http"
	"testing"

	"github.com/google/uuid"

	"slipway/server/httpx"
)

func TestAuthorize(t *testing.T) {
	ws := uuid.New()
	admin := &Principal{OrgRole: OrgAdmin, WorkspaceID: ws, WorkspaceRole: WSAdmin}
	readOnlyAdmin := &Principal{OrgRole: OrgAdmin, WorkspaceID: ws, WorkspaceRole: WSAdmin, ReadOnly: true}
	viewer := &Principal{OrgRole: OrgUser, WorkspaceID: ws, WorkspaceRole: WSViewer}
	orgOnly := &Principal{OrgRole: OrgAdmin}
	agentPol := Policy{Workspace: true, Access: AgentAPI}
	cases := []struct {
		name   string
		p      *Principal
		method string
		path   string
		pol    Policy
		ok     bool
	}{
		{"admin writes", admin, "POST", "", Policy{}, true},
		{"read-only reads", readOnlyAdmin, "GET", "", Policy{}, true},
		{"read-only HEAD", readOnlyAdmin, "HEAD", "", Policy{Workspace: true}, true},
		{"read-only POST on an organization route", readOnlyAdmin, "POST", "", Policy{}, false},
		{"read-only PATCH on an organization route", readOnlyAdmin, "PATCH", "", Policy{}, false},
		{"read-only DELETE on a workspace route", readOnlyAdmin, "DELETE", "", Policy{Workspace: true}, false},
		{"read-only OPTIONS is not a read", readOnlyAdmin, "OPTIONS", "", Policy{Workspace: true}, false},
		{"read-only POST declared read", readOnlyAdmin, "POST", "", Policy{Workspace: true, Access: Read}, true},
		{"viewer writes in the workspace", viewer, "POST", "", Policy{Workspace: true}, false},
		{"viewer reads in the workspace", viewer, "GET", "", Policy{Workspace: true}, true},
		{"viewer on an organization route: the handler decides", viewer, "POST", "", Policy{}, true},
		{"no workspace on a workspace route", orgOnly, "GET", "", Policy{Workspace: true}, false},
		{"viewer searches threads on the agent API", viewer, "POST", "/threads/search", agentPol, true},
		{"viewer counts assistants on the agent API", viewer, "POST", "/assistants/count", agentPol, true},
		{"viewer reads a thread's history on the agent API", viewer, "POST", "/threads/" + ws.String() + "/history", agentPol, true},
		{"viewer reads the state at a checkpoint", viewer, "POST", "/threads/t/state/checkpoint", agentPol, true},
		{"viewer searches crons", viewer, "POST", "/runs/crons/search", agentPol, true},
		{"viewer searches store items", viewer, "POST", "/store/items/search", agentPol, true},
		{"viewer lists assistant versions", viewer, "POST", "/assistants/a/versions", agentPol, true},
		{"viewer creates a run: a write", viewer, "POST", "/threads/t/runs", agentPol, false},
		{"viewer creates a stateless run: a write", viewer, "POST", "/runs/stream", agentPol, false},
		{"viewer prunes threads: a write", viewer, "POST", "/threads/prune", agentPol, false},
		{"viewer updates state: a write", viewer, "POST", "/threads/t/state", agentPol, false},
		{"viewer on an app's custom route: a write", viewer, "POST", "/custom/search", agentPol, false},
		{"viewer deletes a thread", viewer, "DELETE", "/threads/t", agentPol, false},
		{"a path that climbs out is not a query", viewer, "POST", "/x/../../threads/t/runs", agentPol, false},
		{"read-only credential searches threads", readOnlyAdmin, "POST", "/threads/search", agentPol, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Authorize(tc.p, tc.method, tc.path, tc.pol)
			if (err == nil) != tc.ok {
				t.Fatalf("Authorize = %v, want ok=%v", err, tc.ok)
			}
			var he *httpx.Error
			if err != nil && (!errors.As(err, &he) || he.Status != http.StatusForbidden || he.Detail == "") {
				t.Fatalf("refusal %v is not a 403 with a detail", err)
			}
		})
	}
}
