package server

import (
	"bytes"
	"net/http"
	"sort"
	"strings"
	"testing"

	"slipway/runtime/fake"
	"slipway/server/admin"
	"slipway/server/controlplane"
	"slipway/server/httpx"
	"slipway/server/orgapi"
	"slipway/server/servertest"
	"slipway/server/track"
)

// The credential kinds of the authorization matrix, in the column order of
// authzMatrix's outcome strings.
var authzKinds = []string{
	"org-admin",    // the bootstrap Organization Admin key
	"org-operator", // an organization service key with Organization Operator
	"ws-admin",     // a workspace service key, Admin
	"ws-editor",    // a workspace service key, Editor
	"ws-viewer",    // a workspace service key, Viewer
	"ro-pat",       // a read-only personal access token of the Organization Admin
	"session",      // a basic-auth login session of an Organization User who is workspace Admin
	"other-org",    // another organization's admin key naming this organization's workspace
	"none",         // no credential
}

// authzMatrix is the expected outcome of every route `slipway serve`
// registers (without its /api-host twin, which must answer the same) for
// each credential kind: 'a' allowed (any status but 401 and 403), '3' a 403
// and '1' a 401, both with a detail. A route missing here fails the test.
var authzMatrix = map[string]string{
	// control plane: workspace routes; writes need a writing role
	"GET /v2/deployments":                              "aaaaaaa31",
	"POST /v2/deployments":                             "a3aa33a31",
	"GET /v2/deployments/:id":                          "aaaaaaa31",
	"PATCH /v2/deployments/:id":                        "a3aa33a31",
	"DELETE /v2/deployments/:id":                       "a3aa33a31",
	"GET /v2/deployments/:id/revisions":                "aaaaaaa31",
	"GET /v2/deployments/:id/revisions/:rid":           "aaaaaaa31",
	"POST /v2/deployments/:id/revisions/:rid/redeploy": "a3aa33a31",
	"GET /v2/deployments/:id/revisions/:rid/logs":      "aaaaaaa31",
	"GET /v2/deployments/:id/logs":                     "aaaaaaa31",
	"GET /v2/deployments/:id/metrics":                  "aaaaaaa31",
	"POST /v1/projects/:id/revisions/:rid/build_logs":  "aaaaaaa31",
	"POST /v1/projects/:id/revisions/:rid/deploy_logs": "aaaaaaa31",
	"POST /v2/deployments/:id/upload-url":              "a3aa33a31",
	"POST /deployments/:id/upload-url":                 "a3aa33a31",
	"GET /v2/listeners":                                "aaaaaaa31",
	"POST /v2/listeners":                               "a3aa33a31",
	"GET /v2/listeners/:id":                            "aaaaaaa31",
	"PATCH /v2/listeners/:id":                          "a3aa33a31",
	"DELETE /v2/listeners/:id":                         "a3aa33a31",
	"GET /v1/integrations/github/install":              "aaaaaaa31",
	"GET /api/v1/sessions":                             "aaaaaaa31",
	"PATCH /api/v1/sessions/:session_id":               "a3aa33a31",
	"DELETE /api/v1/sessions/:session_id":              "a3aa33a31",
	"DELETE /api/v1/sessions":                          "a3aa33a31",
	"PUT /v2/uploads/:id":                              "333333333",
	// organization API
	"POST /api/v1/api-key":                                       "a3a333a31",
	"GET /api/v1/api-key":                                        "a3a333a31",
	"DELETE /api/v1/api-key/:id":                                 "a3a333a31",
	"POST /api/v1/api-key/:id":                                   "a33333a31",
	"GET /api/v1/api-key/:id":                                    "aaaaaaa31",
	"DELETE /api/v1/api-key/:id/:pat":                            "aaaaa3a31",
	"POST /api/v1/workspaces":                                    "aa3333331",
	"GET /api/v1/workspaces":                                     "aaaaaaa31",
	"PATCH /api/v1/workspaces/:id":                               "aaa333a31",
	"DELETE /api/v1/workspaces/:id":                              "aa3333331",
	"POST /api/v1/login":                                         "aaaaaaaaa",
	"POST /api/v1/logout":                                        "aaaaa3a31",
	"GET /api/v1/orgs/current/members":                           "aa333aa31",
	"POST /api/v1/orgs/current/members":                          "aa3333331",
	"POST /api/v1/orgs/current/members/batch":                    "aa3333331",
	"POST /api/v1/orgs/current/members/basic/batch":              "aa3333331",
	"PATCH /api/v1/orgs/current/members/:identity_id":            "aa3333331",
	"DELETE /api/v1/orgs/current/members/:identity_id":           "aa3333331",
	"DELETE /api/v1/orgs/current/members/:identity_id/pending":   "aa3333331",
	"PATCH /api/v1/orgs/members/basic":                           "aaaaa3a31",
	"GET /api/v1/orgs/current/roles":                             "aaaaaaa31",
	"POST /api/v1/orgs/current/roles":                            "aa3333331",
	"PATCH /api/v1/orgs/current/roles/:role_id":                  "aa3333331",
	"DELETE /api/v1/orgs/current/roles/:role_id":                 "aa3333331",
	"GET /api/v1/workspaces/current/members":                     "aaaaaaa31",
	"POST /api/v1/workspaces/current/members":                    "aaa333a31",
	"POST /api/v1/workspaces/current/members/batch":              "aaa333a31",
	"PATCH /api/v1/workspaces/:id/members/:identity_id":          "aaa333a31",
	"DELETE /api/v1/workspaces/:id/members/:identity_id":         "aaa333a31",
	"DELETE /api/v1/workspaces/:id/members/:identity_id/pending": "aaa333a31",
	"GET /api/v1/workspaces/current/secrets":                     "aaaaaaa31",
	"POST /api/v1/workspaces/current/secrets":                    "aaa333a31",
	"GET /api/v1/orgs/ttl-settings":                              "aaaaaaa31",
	"PUT /api/v1/orgs/ttl-settings":                              "aa3333331",
	"GET /api/v1/orgs/current/info":                              "aaaaaaa31",
	"PATCH /api/v1/orgs/current/info":                            "aa3333331",
	"GET /api/v1/orgs/current/service-keys":                      "aa333a331",
	"POST /api/v1/orgs/current/service-keys":                     "aa3333331",
	"DELETE /api/v1/orgs/current/service-keys/:api_key_id":       "aa3333331",
	"GET /api/v1/orgs/current/personal-access-tokens":            "aaaaaaa31",
	"POST /api/v1/orgs/current/personal-access-tokens":           "a33333a31",
	"DELETE /api/v1/orgs/current/personal-access-tokens/:pat_id": "aaaaa3a31",
	"GET /api/v1/audit-logs":                                     "aa333a331",
	"GET /api/v1/audit-logs/operations":                          "aaaaaaa31",
	// public
	"GET /ok":           "aaaaaaaaa",
	"GET /info":         "aaaaaaaaa",
	"GET /openapi.json": "aaaaaaaaa",
	"GET /docs":         "aaaaaaaaa",
	// a deployment's generative UI files: public, as on the reference
	"GET /ui-assets/:dep/ui/:graph/:file":  "aaaaaaaaa",
	"HEAD /ui-assets/:dep/ui/:graph/:file": "aaaaaaaaa",
	// the dashboard: its page and files are public, signing in and out
	// needs no credential, and who is signed in is read with one
	"GET /":                "aaaaaaaaa",
	"GET /ui/assets/*file": "aaaaaaaaa",
	"GET /ui/session":      "aaaaaaa31",
	"POST /ui/session":     "aaaaaaaaa",
	"POST /ui/signout":     "aaaaaaaaa",
	// the proxy to deployments: a workspace route for every method
	"GET /agents/:name/*path":     "aaaaaaa31",
	"HEAD /agents/:name/*path":    "aaaaaaa31",
	"POST /agents/:name/*path":    "a3aa33a31",
	"PUT /agents/:name/*path":     "a3aa33a31",
	"PATCH /agents/:name/*path":   "a3aa33a31",
	"DELETE /agents/:name/*path":  "a3aa33a31",
	"OPTIONS /agents/:name/*path": "a3aa33a31",
}

// servedRoutes reads the routes `serve` registers from its own router.
func servedRoutes(t *testing.T) []httpx.Route {
	t.Helper()
	rec := &track.Recorder{}
	a := &app{orgs: &orgapi.Store{Audit: rec}, cp: &controlplane.Service{Audit: rec}, driver: fake.New(0)}
	rt := httpx.Record(httpx.NewRouter())
	a.register(rt)
	return rt.Routes()
}

// TestAuthorizationMatrix calls every route of a real server with every
// kind of credential and compares the outcomes with authzMatrix.
func TestAuthorizationMatrix(t *testing.T) {
	routes := servedRoutes(t)
	s := startApp(t, map[string]string{"DEFAULT_ORG_FEATURE_CAN_USE_AUDIT_LOGS": "true"})
	creds := matrixCredentials(t, s)

	// Logging out ends the session: those routes go last, each with a
	// session of its own.
	sort.SliceStable(routes, func(i, j int) bool {
		return !strings.HasSuffix(routes[i].Path, "/logout") && strings.HasSuffix(routes[j].Path, "/logout")
	})
	seen := map[string]bool{}
	for _, rt := range routes {
		key := rt.Method + " " + strings.TrimPrefix(rt.Path, "/api-host")
		seen[key] = true
		want, ok := authzMatrix[key]
		if !ok {
			t.Errorf("route %s %s has no case in authzMatrix", rt.Method, rt.Path)
			continue
		}
		if len(want) != len(authzKinds) {
			t.Fatalf("authzMatrix[%q] has %d outcomes, want %d", key, len(want), len(authzKinds))
		}
		path := creds.fill(rt.Method, rt.Path)
		got := make([]byte, len(authzKinds))
		for i, kind := range authzKinds {
			if kind == "session" && strings.HasSuffix(rt.Path, "/logout") {
				creds.login()
			}
			r := s.Do(rt.Method, path, matrixBody(rt), creds.headers[kind]...)
			switch r.Status {
			case http.StatusUnauthorized, http.StatusForbidden:
				got[i] = byte('0' + r.Status%10)
				if rt.Method != http.MethodHead && !strings.Contains(string(r.Body), `"detail"`) {
					t.Errorf("%s %s as %s: %d without a detail: %s", rt.Method, path, kind, r.Status, r.Body)
				}
			default:
				got[i] = 'a'
			}
			if got[i] != want[i] {
				t.Errorf("%s %s as %s: status %d, want %s: %s", rt.Method, path, kind, r.Status, outcome(want[i]), r.Body)
			}
		}
	}
	for key := range authzMatrix {
		if !seen[key] {
			t.Errorf("authzMatrix has %q, which serve does not register", key)
		}
	}
	// The agent API's queries are POSTs that read: open to Viewers and
	// read-only credentials, as its GETs are; its other POSTs write. The
	// logout routes above ended the session: a new one.
	creds.login()
	for _, tc := range []struct{ path, want string }{
		{"/threads/search", "aaaaaaa31"},
		{"/threads/count", "aaaaaaa31"},
		{"/assistants/search", "aaaaaaa31"},
		{"/threads/" + creds.workspace + "/history", "aaaaaaa31"},
		{"/store/items/search", "aaaaaaa31"},
		{"/threads/" + creds.workspace + "/runs", "a3aa33a31"},
		{"/runs/wait", "a3aa33a31"},
		{"/threads/prune", "a3aa33a31"},
	} {
		path := "/agents/nothing" + tc.path
		got := make([]byte, len(authzKinds))
		for i, kind := range authzKinds {
			switch s.Do(http.MethodPost, path, map[string]any{}, creds.headers[kind]...).Status {
			case http.StatusUnauthorized:
				got[i] = '1'
			case http.StatusForbidden:
				got[i] = '3'
			default:
				got[i] = 'a'
			}
		}
		if string(got) != tc.want {
			t.Errorf("POST %s by kind (%s): %s, want %s", path, strings.Join(authzKinds, " "), got, tc.want)
		}
	}
}

func outcome(c byte) string {
	switch c {
	case '1':
		return "401"
	case '3':
		return "403"
	}
	return "allowed"
}

// matrixBody is a small body that gets past JSON decoding where a handler
// decodes before it checks permissions.
func matrixBody(rt httpx.Route) any {
	switch {
	case rt.Method == http.MethodGet || rt.Method == http.MethodHead || rt.Method == http.MethodDelete:
		return nil
	case strings.HasSuffix(rt.Path, "/api/v1/workspaces/:id"):
		return map[string]any{"display_name": "Default"}
	case strings.HasSuffix(rt.Path, "/batch") || strings.HasSuffix(rt.Path, "/secrets"):
		return []any{}
	}
	return map[string]any{}
}

type matrixCreds struct {
	headers   map[string][]string
	workspace string
	login     func() // a new session for the "session" kind
}

// fill puts values in a route's parameters: "current" where the handler
// serves only that, this organization's workspace for workspace ids, and
// an id of nothing elsewhere.
func (c *matrixCreds) fill(method, path string) string {
	const nothing = "0190f0f0-0000-7000-8000-000000000000"
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if !strings.HasPrefix(p, ":") && !strings.HasPrefix(p, "*") {
			continue
		}
		prev := parts[i-1]
		switch {
		case p == ":id" && prev == "api-key" && (method != http.MethodDelete || i < len(parts)-1):
			parts[i] = "current"
		case p == ":id" && prev == "workspaces" && i < len(parts)-1:
			parts[i] = "current"
		case p == ":id" && prev == "workspaces":
			parts[i] = c.workspace
		case p == ":name":
			parts[i] = "nothing"
		case p == "*path":
			parts[i] = "threads"
		default:
			parts[i] = nothing
		}
	}
	return strings.Join(parts, "/")
}

// matrixCredentials makes one credential of each kind through the API
// (and the admin CLI for the second organization).
func matrixCredentials(t *testing.T, s *servertest.Server) *matrixCreds {
	t.Helper()
	must := func(r *servertest.Response) map[string]any {
		t.Helper()
		if r.Status != 200 {
			t.Fatalf("setup: %d %s", r.Status, r.Body)
		}
		m, _ := r.JSON().(map[string]any)
		return m
	}
	roles := map[string]string{}
	for _, r := range s.Do("GET", "/api/v1/orgs/current/roles", nil).JSON().([]any) {
		roles[r.(map[string]any)["display_name"].(string)] = r.(map[string]any)["id"].(string)
	}
	var ws string
	for _, w := range s.Do("GET", "/api/v1/workspaces", nil).JSON().([]any) {
		ws = w.(map[string]any)["id"].(string)
	}
	key := func(path string, body map[string]any) []string {
		return []string{"X-Api-Key", must(s.Do("POST", path, body))["key"].(string)}
	}
	c := &matrixCreds{workspace: ws, headers: map[string][]string{
		"org-admin":    nil,
		"org-operator": key("/api/v1/orgs/current/service-keys", map[string]any{"org_role_id": roles["Organization Operator"], "default_workspace_id": ws}),
		"ws-admin":     key("/api/v1/api-key", map[string]any{"role_id": "Admin"}),
		"ws-editor":    key("/api/v1/api-key", map[string]any{"role_id": "Editor"}),
		"ws-viewer":    key("/api/v1/api-key", map[string]any{"role_id": "Viewer"}),
		"ro-pat":       key("/api/v1/api-key/current", map[string]any{"read_only": true}),
		"none":         {"X-Api-Key", ""},
	}}
	const pw = "session-user-password"
	r := s.Do("POST", "/api/v1/orgs/current/members/basic/batch", []any{map[string]any{
		"email": "member@example.com", "password": pw, "role_id": roles["Organization User"]}})
	if r.Status != 200 {
		t.Fatalf("setup: %d %s", r.Status, r.Body)
	}
	member := r.JSON().([]any)[0].(map[string]any)["id"].(string)
	must(s.Do("PATCH", "/api/v1/workspaces/current/members/"+member, map[string]any{"role_id": roles["Admin"]}))
	c.login = func() {
		token := must(s.Do("POST", "/api/v1/login", map[string]any{"email": "member@example.com", "password": pw}, "X-Api-Key", ""))["access_token"].(string)
		c.headers["session"] = []string{"X-Api-Key", "", "Authorization", "Bearer " + token}
	}
	c.login()

	var out, other, errb bytes.Buffer
	if code := admin.Main([]string{"org", "create", "--name", "Elsewhere"}, s.DataDir, &out, &errb); code != 0 {
		t.Fatalf("admin org create: exit %d: %s", code, errb.String())
	}
	if code := admin.Main([]string{"org", "create-admin-key", strings.TrimSpace(out.String())}, s.DataDir, &other, &errb); code != 0 {
		t.Fatalf("admin org create-admin-key: exit %d: %s", code, errb.String())
	}
	c.headers["other-org"] = []string{"X-Api-Key", strings.TrimSpace(other.String()), "X-Tenant-Id", ws}
	for _, kind := range authzKinds {
		if _, ok := c.headers[kind]; !ok {
			t.Fatalf("no credential of kind %s", kind)
		}
	}
	return c
}
