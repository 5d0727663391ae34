package orgapi_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/julienschmidt/httprouter"

	"slipway/server/audit/ocsftest"
	"slipway/server/controlplane"
	"slipway/server/httpx"
	"slipway/server/orgapi"
	"slipway/server/servertest"
	"slipway/server/track"
)

// trackedCase performs one tracked operation successfully and once more in
// a way that is refused; it returns the resource uid the success affects.
type trackedCase struct {
	op        string
	succeed   func() (resource string)
	refuse    func() *servertest.Response
	refusedAs int
	// session: the success is made by a basic-auth user through a login
	// session, so its event names that user and a null credential.
	session bool
}

// TestEveryTrackedOperation performs every tracked operation Slipway
// exposes once successfully and once refused, and checks that each left
// exactly one Success and one Failure event with the right operation,
// actor, credential and resources.
func TestEveryTrackedOperation(t *testing.T) {
	s := auditServer(t)
	// A personal access token of the admin: its id is the credential of
	// every successful operation below.
	pat := s.Do("POST", "/api/v1/api-key/current", map[string]any{"description": "audit test"}).Map()
	patKey, patID := pat["key"].(string), pat["id"].(string)
	ro := s.Do("POST", "/api/v1/api-key", map[string]any{"read_only": true}).Map()
	roKey, roID := ro["key"].(string), ro["id"].(string)
	as := func(key, method, path string, body any) *servertest.Response {
		return s.Do(method, path, body, "X-Api-Key", key)
	}
	ok := func(r *servertest.Response, want int) *servertest.Response {
		t.Helper()
		if r.Status != want {
			t.Fatalf("status %d, want %d: %s", r.Status, want, r.Body)
		}
		return r
	}
	var wsID, depID, keyID, pat2ID string
	var svcKeyID, roleID, adaID, bobID, carolID, erinID, ttlID, projID, spareProjID, sessionToken string
	const adaPassword = "ada-correct-horse-battery"
	const workspaceSecret = "sk-workspace-secret-value"
	orgID := ok(s.Do("GET", "/api/v1/orgs/current/members", nil), 200).Map()["organization_id"].(string)
	var adminID string
	for _, m := range ok(s.Do("GET", "/api/v1/orgs/current/members", nil), 200).Map()["members"].([]any) {
		if m.(map[string]any)["email"] == "admin@localhost" {
			adminID = m.(map[string]any)["id"].(string)
		}
	}
	roleIDs := map[string]string{}
	for _, r := range ok(s.Do("GET", "/api/v1/orgs/current/roles", nil), 200).JSON().([]any) {
		roleIDs[r.(map[string]any)["display_name"].(string)] = r.(map[string]any)["id"].(string)
	}
	// A deployment made and deleted before the cases (its events are left
	// out below) leaves a tracing project that no deployment owns.
	spareID := ok(as(patKey, "POST", "/v2/deployments", deployment("spare")), 201).Map()["id"].(string)
	ok(as(patKey, "DELETE", "/v2/deployments/"+spareID, nil), 204)
	unowned := func(name string) string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for s.Do("GET", "/v2/deployments/"+spareID, nil).Status != 404 || name == "audited" && s.Do("GET", "/v2/deployments/"+depID, nil).Status != 404 {
			if time.Now().After(deadline) {
				t.Fatalf("deployments not torn down")
			}
			time.Sleep(20 * time.Millisecond)
		}
		list := ok(s.Do("GET", "/api/v1/sessions?name="+name, nil), 200).JSON().([]any)
		if len(list) != 1 {
			t.Fatalf("tracing project %s: %v", name, list)
		}
		return list[0].(map[string]any)["id"].(string)
	}
	cases := []trackedCase{
		{op: "create_api_key", succeed: func() string {
			keyID = ok(as(patKey, "POST", "/api/v1/api-key", map[string]any{}), 200).Map()["id"].(string)
			return keyID
		}, refuse: func() *servertest.Response { return as(roKey, "POST", "/api/v1/api-key", map[string]any{}) }, refusedAs: 403},
		{op: "delete_api_key", succeed: func() string {
			ok(as(patKey, "DELETE", "/api/v1/api-key/"+keyID, nil), 200)
			return keyID
		}, refuse: func() *servertest.Response { return as(roKey, "DELETE", "/api/v1/api-key/"+roID, nil) }, refusedAs: 403},
		{op: "create_personal_access_token", succeed: func() string {
			pat2ID = ok(as(patKey, "POST", "/api/v1/api-key/current", map[string]any{}), 200).Map()["id"].(string)
			return pat2ID
		}, refuse: func() *servertest.Response { return as(roKey, "POST", "/api/v1/api-key/current", map[string]any{}) }, refusedAs: 403},
		{op: "delete_personal_access_token", succeed: func() string {
			ok(as(patKey, "DELETE", "/api/v1/api-key/current/"+pat2ID, nil), 200)
			return pat2ID
		}, refuse: func() *servertest.Response {
			return as(patKey, "DELETE", "/api/v1/api-key/current/0190f0f0-0000-7000-8000-000000000000", nil)
		}, refusedAs: 404},
		{op: "create_workspace", succeed: func() string {
			wsID = ok(as(patKey, "POST", "/api/v1/workspaces", map[string]any{"display_name": "Audited"}), 200).Map()["id"].(string)
			return wsID
		}, refuse: func() *servertest.Response {
			return as(roKey, "POST", "/api/v1/workspaces", map[string]any{"display_name": "x"})
		}, refusedAs: 403},
		{op: "update_workspace", succeed: func() string {
			ok(as(patKey, "PATCH", "/api/v1/workspaces/"+wsID, map[string]any{"display_name": "Audited 2"}), 200)
			return wsID
		}, refuse: func() *servertest.Response {
			return as(patKey, "PATCH", "/api/v1/workspaces/"+wsID, map[string]any{"display_name": ""})
		}, refusedAs: 422},
		{op: "delete_workspace", succeed: func() string {
			ok(as(patKey, "DELETE", "/api/v1/workspaces/"+wsID, nil), 200)
			return wsID
		}, refuse: func() *servertest.Response {
			// A read-only credential is refused before the workspace is looked up.
			return as(roKey, "DELETE", "/api/v1/workspaces/"+wsID, nil)
		}, refusedAs: 403},
		{op: "create_deployment", succeed: func() string {
			depID = ok(as(patKey, "POST", "/v2/deployments", deployment("audited")), 201).Map()["id"].(string)
			return depID
		}, refuse: func() *servertest.Response { return as(patKey, "POST", "/v2/deployments", deployment("Bad Name")) }, refusedAs: 422},
		{op: "update_deployment", succeed: func() string {
			ok(as(patKey, "PATCH", "/v2/deployments/"+depID, map[string]any{"secrets": []any{map[string]any{"name": "TOKEN", "value": "hunter2-secret"}}}), 200)
			return depID
		}, refuse: func() *servertest.Response {
			return as(patKey, "PATCH", "/v2/deployments/"+depID, map[string]any{"name": "renamed"})
		}, refusedAs: 422},
		{op: "delete_deployment", succeed: func() string {
			ok(as(patKey, "DELETE", "/v2/deployments/"+depID, nil), 204)
			return depID
		}, refuse: func() *servertest.Response {
			return as(patKey, "DELETE", "/v2/deployments/0190f0f0-0000-7000-8000-000000000000", nil)
		}, refusedAs: 404},
		{op: "create_service_key", succeed: func() string {
			svcKeyID = ok(as(patKey, "POST", "/api/v1/orgs/current/service-keys", map[string]any{"description": "ci"}), 200).Map()["id"].(string)
			return svcKeyID
		}, refuse: func() *servertest.Response {
			return as(roKey, "POST", "/api/v1/orgs/current/service-keys", map[string]any{})
		}, refusedAs: 403},
		{op: "delete_service_key", succeed: func() string {
			ok(as(patKey, "DELETE", "/api/v1/orgs/current/service-keys/"+svcKeyID, nil), 200)
			return svcKeyID
		}, refuse: func() *servertest.Response {
			return as(patKey, "DELETE", "/api/v1/orgs/current/service-keys/"+svcKeyID, nil)
		}, refusedAs: 404},
		{op: "create_role", succeed: func() string {
			roleID = ok(as(patKey, "POST", "/api/v1/orgs/current/roles", map[string]any{"display_name": "Deployer",
				"description": "ships deployments", "permissions": []string{"deployments:read", "deployments:create"}}), 200).Map()["id"].(string)
			return roleID
		}, refuse: func() *servertest.Response {
			return as(patKey, "POST", "/api/v1/orgs/current/roles", map[string]any{"display_name": "Boss",
				"description": "", "permissions": []string{"organization:manage"}})
		}, refusedAs: 422},
		{op: "update_role", succeed: func() string {
			ok(as(patKey, "PATCH", "/api/v1/orgs/current/roles/"+roleID, map[string]any{"display_name": "Deployer",
				"description": "ships and updates deployments", "permissions": []string{"deployments:read", "deployments:create", "deployments:update"}}), 200)
			return roleID
		}, refuse: func() *servertest.Response {
			return as(patKey, "PATCH", "/api/v1/orgs/current/roles/"+roleIDs["Admin"], map[string]any{"display_name": "Admin",
				"description": "", "permissions": []string{}})
		}, refusedAs: 400},
		{op: "add_basic_auth_users_to_org", succeed: func() string {
			r := ok(as(patKey, "POST", "/api/v1/orgs/current/members/basic/batch", []any{map[string]any{"email": "ada@example.com",
				"password": adaPassword, "full_name": "Ada", "workspace_role_id": roleID}}), 200)
			adaID = r.JSON().([]any)[0].(map[string]any)["id"].(string)
			return adaID
		}, refuse: func() *servertest.Response {
			return as(patKey, "POST", "/api/v1/orgs/current/members/basic/batch", []any{map[string]any{"email": "eve@example.com", "password": "short"}})
		}, refusedAs: 422},
		{op: "invite_user_to_org", succeed: func() string {
			bobID = ok(as(patKey, "POST", "/api/v1/orgs/current/members", map[string]any{"email": "bob@example.com"}), 200).Map()["id"].(string)
			return bobID
		}, refuse: func() *servertest.Response {
			return as(roKey, "POST", "/api/v1/orgs/current/members", map[string]any{"email": "mallory@example.com"})
		}, refusedAs: 403},
		{op: "invite_users_to_org_batch", succeed: func() string {
			r := ok(as(patKey, "POST", "/api/v1/orgs/current/members/batch", []any{map[string]any{"email": "carol@example.com"},
				map[string]any{"email": "dan@example.com", "role_id": roleIDs["Organization Viewer"]}}), 200)
			carolID = r.JSON().([]any)[0].(map[string]any)["id"].(string)
			return carolID
		}, refuse: func() *servertest.Response {
			return as(patKey, "POST", "/api/v1/orgs/current/members/batch", []any{map[string]any{"email": "not-an-email"}})
		}, refusedAs: 422},
		{op: "delete_org_pending_member", succeed: func() string {
			ok(as(patKey, "DELETE", "/api/v1/orgs/current/members/"+bobID+"/pending", nil), 200)
			return bobID
		}, refuse: func() *servertest.Response {
			return as(patKey, "DELETE", "/api/v1/orgs/current/members/"+bobID+"/pending", nil)
		}, refusedAs: 404},
		{op: "update_org_member", succeed: func() string {
			ok(as(patKey, "PATCH", "/api/v1/orgs/current/members/"+adaID, map[string]any{"full_name": "Ada L."}), 200)
			return adaID
		}, refuse: func() *servertest.Response {
			return as(patKey, "PATCH", "/api/v1/orgs/current/members/"+adaID, map[string]any{"role_id": roleIDs["Admin"]})
		}, refusedAs: 422},
		{op: "update_basic_auth_user", session: true, succeed: func() string {
			login := ok(s.Do("POST", "/api/v1/login", map[string]any{"email": "ada@example.com", "password": adaPassword}, "X-Api-Key", ""), 200)
			sessionToken = login.Map()["access_token"].(string)
			ok(s.Do("PATCH", "/api/v1/orgs/members/basic", map[string]any{"full_name": "Ada Lovelace"},
				"X-Api-Key", "", "Authorization", "Bearer "+sessionToken, "X-Organization-Id", orgID), 200)
			return adaID
		}, refuse: func() *servertest.Response {
			return as(patKey, "PATCH", "/api/v1/orgs/members/basic", map[string]any{"full_name": "Admin"})
		}, refusedAs: 400},
		{op: "delete_workspace_member", succeed: func() string {
			ok(as(patKey, "DELETE", "/api/v1/workspaces/current/members/"+adaID, nil), 200)
			return adaID
		}, refuse: func() *servertest.Response {
			return as(patKey, "DELETE", "/api/v1/workspaces/current/members/"+adaID, nil)
		}, refusedAs: 404},
		{op: "add_member_to_workspace", succeed: func() string {
			ok(as(patKey, "POST", "/api/v1/workspaces/current/members", map[string]any{"user_id": adaID, "role_id": roleID}), 200)
			return adaID
		}, refuse: func() *servertest.Response {
			return as(patKey, "POST", "/api/v1/workspaces/current/members", map[string]any{"role_id": roleID})
		}, refusedAs: 422},
		{op: "update_workspace_member", succeed: func() string {
			ok(as(patKey, "PATCH", "/api/v1/workspaces/current/members/"+adaID, map[string]any{"role_id": roleIDs["Editor"]}), 200)
			return adaID
		}, refuse: func() *servertest.Response {
			return as(patKey, "PATCH", "/api/v1/workspaces/current/members/"+adaID, map[string]any{"role_id": "0190f0f0-0000-7000-8000-000000000000"})
		}, refusedAs: 422},
		{op: "add_members_to_workspace_batch", succeed: func() string {
			erinID = ok(as(patKey, "POST", "/api/v1/workspaces/current/members/batch", []any{map[string]any{"email": "erin@example.com"}}), 200).JSON().([]any)[0].(map[string]any)["id"].(string)
			return erinID
		}, refuse: func() *servertest.Response {
			return as(roKey, "POST", "/api/v1/workspaces/current/members/batch", []any{map[string]any{"email": "frank@example.com"}})
		}, refusedAs: 403},
		{op: "delete_workspace_pending_member", succeed: func() string {
			ok(as(patKey, "DELETE", "/api/v1/workspaces/current/members/"+erinID+"/pending", nil), 200)
			return erinID
		}, refuse: func() *servertest.Response {
			return as(patKey, "DELETE", "/api/v1/workspaces/current/members/"+carolID+"/pending", nil)
		}, refusedAs: 404},
		{op: "delete_org_member", succeed: func() string {
			ok(as(patKey, "DELETE", "/api/v1/orgs/current/members/"+adaID, nil), 200)
			return adaID
		}, refuse: func() *servertest.Response {
			return as(patKey, "DELETE", "/api/v1/orgs/current/members/"+adminID, nil)
		}, refusedAs: 400},
		{op: "delete_role", succeed: func() string {
			ok(as(patKey, "DELETE", "/api/v1/orgs/current/roles/"+roleID, nil), 200)
			return roleID
		}, refuse: func() *servertest.Response {
			return as(patKey, "DELETE", "/api/v1/orgs/current/roles/"+roleIDs["Viewer"], nil)
		}, refusedAs: 400},
		{op: "update_workspace_secrets", succeed: func() string {
			ok(as(patKey, "POST", "/api/v1/workspaces/current/secrets", []any{map[string]any{"key": "OPENAI_API_KEY", "value": workspaceSecret}}), 200)
			return ok(s.Do("GET", "/api/v1/workspaces", nil), 200).JSON().([]any)[0].(map[string]any)["id"].(string)
		}, refuse: func() *servertest.Response {
			return as(patKey, "POST", "/api/v1/workspaces/current/secrets", []any{map[string]any{"key": "1BAD", "value": workspaceSecret}})
		}, refusedAs: 422},
		{op: "update_ttl_settings", succeed: func() string {
			ttlID = ok(as(patKey, "PUT", "/api/v1/orgs/ttl-settings", map[string]any{"default_trace_tier": "longlived", "audit_log_retention_days": 365}), 200).Map()["id"].(string)
			return ttlID
		}, refuse: func() *servertest.Response {
			return as(patKey, "PUT", "/api/v1/orgs/ttl-settings", map[string]any{"default_trace_tier": "longlived", "audit_log_retention_days": 401})
		}, refusedAs: 422},
		{op: "update_organization_info", succeed: func() string {
			ok(as(patKey, "PATCH", "/api/v1/orgs/current/info", map[string]any{"display_name": "Acme"}), 200)
			return orgID
		}, refuse: func() *servertest.Response {
			return as(roKey, "PATCH", "/api/v1/orgs/current/info", map[string]any{"display_name": "Hijacked"})
		}, refusedAs: 403},
		{op: "update_tracer_session", succeed: func() string {
			projID = unowned("audited")
			ok(as(patKey, "PATCH", "/api/v1/sessions/"+projID, map[string]any{"name": "audited-archive", "description": "kept"}), 200)
			return projID
		}, refuse: func() *servertest.Response {
			return as(patKey, "PATCH", "/api/v1/sessions/"+projID, map[string]any{"name": ""})
		}, refusedAs: 422},
		{op: "delete_tracer_session", succeed: func() string {
			ok(as(patKey, "DELETE", "/api/v1/sessions/"+projID, nil), 200)
			return projID
		}, refuse: func() *servertest.Response {
			return as(patKey, "DELETE", "/api/v1/sessions/"+projID, nil)
		}, refusedAs: 404},
		{op: "delete_tracer_sessions", succeed: func() string {
			spareProjID = unowned("spare")
			ok(as(patKey, "DELETE", "/api/v1/sessions?session_ids="+spareProjID, nil), 200)
			return spareProjID
		}, refuse: func() *servertest.Response {
			return as(patKey, "DELETE", "/api/v1/sessions?session_ids=not-a-uuid", nil)
		}, refusedAs: 422},
	}
	// The cases must cover every operation the server's routes track: a
	// newly tracked endpoint without a case fails here.
	rec := &track.Recorder{}
	rt := httpx.Record(httprouter.New())
	(&orgapi.Store{Audit: rec}).Routes(rt, "")
	(&controlplane.Service{Audit: rec}).Routes(rt, &orgapi.Store{}, "")
	var covered []string
	for _, tc := range cases {
		covered = append(covered, tc.op)
	}
	sort.Strings(covered)
	if got, want := strings.Join(rec.Tracked(), " "), strings.Join(covered, " "); got != want {
		t.Fatalf("tracked operations of the routes:\n  %s\ncases:\n  %s", got, want)
	}
	schema, err := ocsftest.Load(ocsftest.SchemaDir())
	if err != nil {
		t.Fatalf("load the OCSF 1.7.0 schema from testdata/ocsf-schema-1.7.0: %v", err)
	}
	resources := map[string]string{}
	for _, tc := range cases {
		resources[tc.op] = tc.succeed()
		if r := tc.refuse(); r.Status != tc.refusedAs {
			t.Fatalf("%s refused with %d, want %d: %s", tc.op, r.Status, tc.refusedAs, r.Body)
		}
	}
	start := url.QueryEscape(time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))
	end := url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	for _, tc := range cases {
		t.Run(tc.op, func(t *testing.T) {
			r := s.Do("GET", "/api/v1/audit-logs?limit=100&start_time="+start+"&end_time="+end+"&operations="+tc.op, nil)
			if r.Status != 200 {
				t.Fatalf("query: %d %s", r.Status, r.Body)
			}
			var items []any
			for _, it := range r.Map()["items"].([]any) {
				// The setup created the PAT and the read-only key: not part of the case.
				res := fmt.Sprint(it.(map[string]any)["resources"])
				if strings.Contains(res, patID) && tc.op == "create_personal_access_token" || strings.Contains(res, roID) && tc.op == "create_api_key" ||
					strings.Contains(res, spareID) && (tc.op == "create_deployment" || tc.op == "delete_deployment") {
					continue
				}
				items = append(items, it)
			}
			byStatus := map[string]map[string]any{}
			for _, it := range items {
				e := it.(map[string]any)
				byStatus[e["status"].(string)] = e
			}
			if len(items) != 2 || byStatus["Success"] == nil || byStatus["Failure"] == nil {
				var st []string
				for _, it := range items {
					st = append(st, it.(map[string]any)["status"].(string))
				}
				sort.Strings(st)
				t.Fatalf("want one Success and one Failure, got %v", st)
			}
			okEv, bad := byStatus["Success"], byStatus["Failure"]
			for _, e := range []map[string]any{okEv, bad} {
				if e["api"].(map[string]any)["operation"] != tc.op {
					t.Fatalf("operation %v", e["api"])
				}
			}
			user := okEv["actor"].(map[string]any)["user"].(map[string]any)
			if tc.session {
				// A session has no credential id: the field is present and null.
				if cred, present := user["credential_uid"]; !present || cred != nil || user["uid"] != adaID {
					t.Fatalf("session success: actor %v credential %v, want %s and null", user["uid"], cred, adaID)
				}
			} else if user["credential_uid"] != patID {
				t.Fatalf("success credential %v, want the PAT %s", user["credential_uid"], patID)
			}
			if !tc.session && user["uid"] != adminID {
				t.Fatalf("actor %v, want the admin %s", user["uid"], adminID)
			}
			var uids []string
			for _, res := range okEv["resources"].([]any) {
				uids = append(uids, res.(map[string]any)["uid"].(string))
			}
			if !contains(uids, resources[tc.op]) {
				t.Fatalf("resources %v lack %s", uids, resources[tc.op])
			}
			if code := bad["http_response"].(map[string]any)["code"].(float64); int(code) != tc.refusedAs {
				t.Fatalf("failure recorded code %v, want %d", code, tc.refusedAs)
			}
			for _, it := range items {
				raw, _ := json.Marshal(it)
				if v := schema.ValidateJSON(raw); len(v) > 0 {
					t.Fatalf("event is not valid OCSF 1.7.0 API Activity: %v", v)
				}
			}
			raw := fmt.Sprint(items)
			for _, secret := range []string{"hunter2-secret", patKeyOf(pat), roKey, adaPassword, workspaceSecret, sessionToken} {
				if strings.Contains(raw, secret) {
					t.Fatalf("an event contains a secret or key")
				}
			}
		})
	}
}

func patKeyOf(m map[string]any) string { return m["key"].(string) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
