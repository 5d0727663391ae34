package orgapi_test

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"slipway/server/servertest"
)

// roleIDs maps the display names of the organization's roles to their ids.
func roleIDs(t *testing.T, s *servertest.Server) map[string]string {
	t.Helper()
	r := s.Do("GET", "/api/v1/orgs/current/roles", nil)
	mustStatus(t, r, 200)
	out := map[string]string{}
	for _, role := range r.JSON().([]any) {
		out[role.(map[string]any)["display_name"].(string)] = role.(map[string]any)["id"].(string)
	}
	return out
}

func login(t *testing.T, s *servertest.Server, email, password string) string {
	t.Helper()
	r := s.Do("POST", "/api/v1/login", map[string]any{"email": email, "password": password}, "X-Api-Key", "")
	mustStatus(t, r, 200)
	return r.Map()["access_token"].(string)
}

// TestBasicAuthUsersRolesAndSessions drives members, roles and login
// sessions through a real server: what each role may do, custom roles,
// invitations taken up by a basic-auth user, sessions ended by a password
// change, the guards around Organization Admin, and the validation rules.
func TestBasicAuthUsersRolesAndSessions(t *testing.T) {
	s := auditServer(t)
	roles := roleIDs(t, s)
	org := s.Do("GET", "/api/v1/orgs/current/members", nil).Map()["organization_id"].(string)

	// A user added without a password gets a generated one, shown once.
	r := s.Do("POST", "/api/v1/orgs/current/members/basic/batch", []any{map[string]any{"email": "Ada@Example.com", "full_name": "Ada"}})
	mustStatus(t, r, 200)
	ada := r.JSON().([]any)[0].(map[string]any)
	adaID, adaPW := ada["id"].(string), ada["password"].(string)
	if ada["email"] != "ada@example.com" || len(adaPW) < 12 {
		t.Fatalf("basic-auth user %s", r.Body)
	}
	if strings.Contains(string(s.Do("GET", "/api/v1/orgs/current/members", nil).Body), adaPW) {
		t.Fatal("the member list shows a password")
	}

	// Login: wrong password, unknown email, HTTP Basic, JSON.
	for _, bad := range []map[string]any{{"email": "ada@example.com", "password": "wrong-password-1"}, {"email": "nobody@example.com", "password": adaPW}} {
		r := s.Do("POST", "/api/v1/login", bad, "X-Api-Key", "")
		mustStatus(t, r, 401)
		detail(t, r)
	}
	assertValidation(t, s.Do("POST", "/api/v1/login", map[string]any{"email": "ada@example.com"}, "X-Api-Key", ""), []any{"body", "password"}, "missing")
	basic := servertest.Do(t, "POST", s.URL+"/api/v1/login", nil, "Authorization", "Basic "+basicAuth("ada@example.com", adaPW))
	mustStatus(t, basic, 200)
	tok := login(t, s, "ada@example.com", adaPW)
	asAda := func(method, path string, body any) *servertest.Response {
		return s.Do(method, path, body, "X-Api-Key", "", "Authorization", "Bearer "+tok, "X-Organization-Id", org)
	}

	// Organization User with the default workspace's Viewer role: reads,
	// cannot write, cannot read the audit log.
	mustStatus(t, asAda("GET", "/v2/deployments", nil), 200)
	mustForbidden(t, asAda("POST", "/v2/deployments", deployment("by-ada")))
	start, end := window()
	mustForbidden(t, asAda("GET", "/api/v1/audit-logs?start_time="+start+"&end_time="+end, nil))
	mustForbidden(t, asAda("POST", "/api/v1/orgs/current/roles", map[string]any{"display_name": "x", "description": "", "permissions": []string{}}))

	// A custom role that creates deployments makes Ada able to.
	r = s.Do("POST", "/api/v1/orgs/current/roles", map[string]any{"display_name": "Shipper", "description": "creates deployments",
		"permissions": []string{"deployments:read", "deployments:create"}})
	mustStatus(t, r, 200)
	shipper := r.Map()["id"].(string)
	mustStatus(t, s.Do("POST", "/api/v1/orgs/current/roles", map[string]any{"display_name": "shipper", "description": "", "permissions": []string{}}), 409)
	mustStatus(t, s.Do("PATCH", "/api/v1/workspaces/current/members/"+adaID, map[string]any{"role_id": shipper}), 200)
	mustStatus(t, asAda("POST", "/v2/deployments", deployment("by-ada")), 201)
	// A role in use cannot be deleted.
	mustStatus(t, s.Do("DELETE", "/api/v1/orgs/current/roles/"+shipper, nil), 400)
	members := s.Do("GET", "/api/v1/workspaces/current/members", nil)
	mustStatus(t, members, 200)
	if !strings.Contains(string(members.Body), `"role_name":"Shipper"`) {
		t.Fatalf("workspace members %s", members.Body)
	}

	// An invitation names the Operator role; adding the basic-auth user
	// with that email takes it up.
	mustStatus(t, s.Do("POST", "/api/v1/orgs/current/members", map[string]any{"email": "op@example.com", "role_id": roles["Organization Operator"]}), 200)
	mustStatus(t, s.Do("POST", "/api/v1/orgs/current/members", map[string]any{"email": "op@example.com"}), 409)
	r = s.Do("POST", "/api/v1/orgs/current/members/basic/batch", []any{map[string]any{"email": "op@example.com", "password": "operator-password-1"}})
	mustStatus(t, r, 200)
	opID := r.JSON().([]any)[0].(map[string]any)["id"].(string)
	if p := s.Do("GET", "/api/v1/orgs/current/members", nil).Map()["pending"].([]any); len(p) != 0 {
		t.Fatalf("invitation not taken up: %v", p)
	}
	opTok := login(t, s, "op@example.com", "operator-password-1")
	asOp := func(method, path string, body any) *servertest.Response {
		return s.Do(method, path, body, "X-Api-Key", "", "Authorization", "Bearer "+opTok, "X-Organization-Id", org)
	}
	mustStatus(t, asOp("GET", "/api/v1/audit-logs?start_time="+start+"&end_time="+end, nil), 200)
	// Operators manage the organization but cannot make or unmake admins.
	mustForbidden(t, asOp("PATCH", "/api/v1/orgs/current/members/"+adaID, map[string]any{"role_id": roles["Organization Admin"]}))
	mustForbidden(t, asOp("POST", "/api/v1/orgs/current/service-keys", map[string]any{"org_role_id": roles["Organization Admin"]}))
	mustStatus(t, asOp("PATCH", "/api/v1/orgs/current/members/"+adaID, map[string]any{"role_id": roles["Organization Viewer"]}), 200)

	// The last Organization Admin stays one.
	var adminID string
	for _, m := range s.Do("GET", "/api/v1/orgs/current/members", nil).Map()["members"].([]any) {
		if m.(map[string]any)["email"] == "admin@localhost" {
			adminID = m.(map[string]any)["id"].(string)
		}
	}
	mustStatus(t, s.Do("PATCH", "/api/v1/orgs/current/members/"+adminID, map[string]any{"role_id": roles["Organization User"]}), 400)
	mustStatus(t, s.Do("DELETE", "/api/v1/orgs/current/members/"+adminID, nil), 400)

	// A password change ends the user's sessions.
	mustStatus(t, asAda("PATCH", "/api/v1/orgs/members/basic", map[string]any{"password": "a-brand-new-password"}), 200)
	mustStatus(t, asAda("GET", "/v2/deployments", nil), 401)
	tok = login(t, s, "ada@example.com", "a-brand-new-password")
	mustStatus(t, asAda("POST", "/api/v1/logout", nil), 200)
	mustStatus(t, asAda("GET", "/v2/deployments", nil), 401)
	// Removing a member ends their access and frees the login.
	mustStatus(t, s.Do("DELETE", "/api/v1/orgs/current/members/"+opID, nil), 200)
	mustStatus(t, asOp("GET", "/v2/deployments", nil), 401)
	mustStatus(t, s.Do("POST", "/api/v1/login", map[string]any{"email": "op@example.com", "password": "operator-password-1"}, "X-Api-Key", ""), 401)

	// Workspace secrets: keys are listed, values never; null deletes.
	mustStatus(t, s.Do("POST", "/api/v1/workspaces/current/secrets", []any{map[string]any{"key": "A_KEY", "value": "value-one-secret"},
		map[string]any{"key": "B_KEY", "value": "value-two-secret"}}), 200)
	mustStatus(t, s.Do("POST", "/api/v1/workspaces/current/secrets", []any{map[string]any{"key": "A_KEY", "value": nil}}), 200)
	sec := s.Do("GET", "/api/v1/workspaces/current/secrets", nil)
	mustStatus(t, sec, 200)
	if string(sec.Body) != "[{\"key\":\"B_KEY\"}]\n" {
		t.Fatalf("secrets %s", sec.Body)
	}
	// Sealed at rest: the value is nowhere in the database file.
	s.Stop()
	raw, err := os.ReadFile(filepath.Join(s.DataDir, "slipway.db"))
	if err != nil || bytes.Contains(raw, []byte("value-two-secret")) || bytes.Contains(raw, []byte(adaPW)) {
		t.Fatalf("a workspace secret or password is stored in clear (read error %v)", err)
	}
	s.Restart()

	// Validation: one case per rule, with status, loc and type.
	foreign := "0190f0f0-0000-7000-8000-000000000000"
	for _, tc := range []struct {
		method, path string
		body         any
		loc          []any
		typ          string
	}{
		{"POST", "/api/v1/orgs/current/members/basic/batch", []any{}, []any{"body"}, "value_error"},
		{"POST", "/api/v1/orgs/current/members/basic/batch", []any{map[string]any{}}, []any{"body", 0, "email"}, "missing"},
		{"POST", "/api/v1/orgs/current/members/basic/batch", []any{map[string]any{"email": "a@b@c"}}, []any{"body", 0, "email"}, "value_error"},
		{"POST", "/api/v1/orgs/current/members/basic/batch", []any{map[string]any{"email": "z@example.com", "password": "short"}}, []any{"body", 0, "password"}, "value_error"},
		{"POST", "/api/v1/orgs/current/members/basic/batch", []any{map[string]any{"email": "z@example.com", "role_id": roles["Admin"]}}, []any{"body", 0, "role_id"}, "value_error"},
		{"POST", "/api/v1/orgs/current/members/basic/batch", []any{map[string]any{"email": "z@example.com", "workspace_ids": []string{foreign}}}, []any{"body", 0, "workspace_ids", 0}, "value_error"},
		{"POST", "/api/v1/orgs/current/members/basic/batch", []any{map[string]any{"email": "z@example.com", "workspace_role_id": roles["Organization User"]}}, []any{"body", 0, "workspace_role_id"}, "value_error"},
		{"POST", "/api/v1/orgs/current/members/basic/batch", []any{map[string]any{"email": "z@example.com", "nickname": "z"}}, []any{"body", 0, "nickname"}, "extra_forbidden"},
		{"POST", "/api/v1/orgs/current/members", map[string]any{"email": "z@example.com", "password": "long-enough-password"}, []any{"body", "password"}, "value_error"},
		{"PATCH", "/api/v1/orgs/current/members/not-a-uuid", map[string]any{}, []any{"path", "identity_id"}, "uuid_parsing"},
		{"PATCH", "/api/v1/orgs/current/members/" + adaID, map[string]any{"full_name": ""}, []any{"body", "full_name"}, "value_error"},
		{"POST", "/api/v1/orgs/current/roles", map[string]any{"description": "", "permissions": []string{}}, []any{"body", "display_name"}, "missing"},
		{"POST", "/api/v1/orgs/current/roles", map[string]any{"display_name": "r", "permissions": []string{}}, []any{"body", "description"}, "missing"},
		{"POST", "/api/v1/orgs/current/roles", map[string]any{"display_name": "r", "description": ""}, []any{"body", "permissions"}, "missing"},
		{"POST", "/api/v1/orgs/current/roles", map[string]any{"display_name": "r", "description": "", "permissions": []string{"fly"}}, []any{"body", "permissions", 0}, "enum"},
		{"POST", "/api/v1/orgs/current/roles", map[string]any{"display_name": "r", "description": "", "permissions": []string{"deployments:read", "organization:read"}}, []any{"body", "permissions", 1}, "value_error"},
		{"DELETE", "/api/v1/orgs/current/roles/nope", nil, []any{"path", "role_id"}, "uuid_parsing"},
		{"PATCH", "/api/v1/workspaces/current/members/" + adaID, map[string]any{}, []any{"body", "role_id"}, "missing"},
		{"POST", "/api/v1/workspaces/current/members", map[string]any{}, []any{"body", "user_id"}, "missing"},
		{"POST", "/api/v1/workspaces/current/secrets", []any{map[string]any{"value": "x"}}, []any{"body", 0, "key"}, "missing"},
		{"POST", "/api/v1/workspaces/current/secrets", []any{map[string]any{"key": "K", "value": "x"}, map[string]any{"key": "K", "value": "y"}}, []any{"body", 1, "key"}, "value_error"},
		{"POST", "/api/v1/workspaces/current/secrets", map[string]any{"key": "K"}, []any{"body"}, "list_type"},
	} {
		assertValidation(t, s.Do(tc.method, tc.path, tc.body), tc.loc, tc.typ)
	}
	// Not found, each with a detail.
	for _, path := range []string{"/api/v1/orgs/current/members/" + foreign, "/api/v1/orgs/current/roles/" + foreign,
		"/api/v1/orgs/current/members/" + foreign + "/pending", "/api/v1/workspaces/current/members/" + foreign,
		"/api/v1/orgs/current/service-keys/" + foreign, "/api/v1/workspaces/other/members/" + adaID} {
		r := s.Do("DELETE", path, nil)
		mustStatus(t, r, 404)
		detail(t, r)
	}
	// A workspace-scoped key may not manage the organization.
	wsKey := s.Do("POST", "/api/v1/api-key", map[string]any{}).Map()["key"].(string)
	for _, req := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/api/v1/orgs/current/members", map[string]any{"email": "q@example.com"}},
		{"POST", "/api/v1/orgs/current/members/basic/batch", []any{map[string]any{"email": "q@example.com"}}},
		{"DELETE", "/api/v1/orgs/current/members/" + adaID, nil},
		{"POST", "/api/v1/orgs/current/roles", map[string]any{"display_name": "x", "description": "", "permissions": []string{}}},
		{"GET", "/api/v1/orgs/current/service-keys", nil},
		{"GET", "/api/v1/orgs/current/members", nil},
	} {
		mustForbidden(t, s.Do(req.method, req.path, req.body, "X-Api-Key", wsKey))
	}
}

func basicAuth(user, pw string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + pw))
}
