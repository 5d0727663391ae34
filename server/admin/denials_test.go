package admin_test

import (
	"strings"
	"testing"

	"slipway/server/apptest"
)

// TestAuditLogEnvDefaultAndRoleDenialsOverHTTP covers, against a real
// server, the denials that depend on the organization and the caller:
// DEFAULT_ORG_FEATURE_CAN_USE_AUDIT_LOGS enables non-personal Enterprise
// organizations but never personal ones, an organization's own flag set
// to false still wins over it, and a person whose only admin role is a
// workspace role is refused for lack of organization:manage.
func TestAuditLogEnvDefaultAndRoleDenialsOverHTTP(t *testing.T) {
	s := apptest.New(t, map[string]string{"DEFAULT_ORG_FEATURE_CAN_USE_AUDIT_LOGS": "true"})
	orgKey := func(args ...string) (id, key string) {
		t.Helper()
		id = strings.TrimSpace(mustAdmin(t, s.DataDir, append([]string{"org", "create"}, args...)...))
		key = strings.TrimSpace(mustAdmin(t, s.DataDir, "org", "create-admin-key", id))
		return id, key
	}
	expect := func(key, org string, status int, detail string) {
		t.Helper()
		r := auditLogs(s, key, org)
		if r.Status != status || !strings.Contains(string(r.Body), detail) {
			t.Fatalf("audit-logs of %s: %d %s, want %d mentioning %q", org, r.Status, r.Body, status, detail)
		}
	}
	team, teamKey := orgKey("--name", "Team", "--plan", "enterprise")
	expect(teamKey, team, 200, `"items"`)
	me, meKey := orgKey("--name", "Me", "--plan", "enterprise", "--personal")
	expect(meKey, me, 403, "personal")
	small, smallKey := orgKey("--name", "Small", "--plan", "plus")
	expect(smallKey, small, 403, "Enterprise")
	mustAdmin(t, s.DataDir, "org", "set-flag", team, "can_use_audit_logs", "false")
	expect(teamKey, team, 403, "not enabled")
	mustAdmin(t, s.DataDir, "org", "unset-flag", team, "can_use_audit_logs")
	expect(teamKey, team, 200, `"items"`)

	// A workspace Admin who is only an Organization User, logged in with a
	// session, and a workspace-scoped key: both refused.
	var wsAdmin string
	for _, r := range s.Do("GET", "/api/v1/orgs/current/roles", nil, "X-Api-Key", teamKey).JSON().([]any) {
		if r.(map[string]any)["display_name"] == "Admin" {
			wsAdmin = r.(map[string]any)["id"].(string)
		}
	}
	r := s.Do("POST", "/api/v1/orgs/current/members/basic/batch", []any{map[string]any{"email": "wsadmin@example.com",
		"password": "workspace-admin-pw", "workspace_role_id": wsAdmin}}, "X-Api-Key", teamKey)
	if r.Status != 200 {
		t.Fatalf("add basic-auth user: %d %s", r.Status, r.Body)
	}
	memberID := r.JSON().([]any)[0].(map[string]any)["id"].(string)
	login := s.Do("POST", "/api/v1/login", map[string]any{"email": "wsadmin@example.com", "password": "workspace-admin-pw"}, "X-Api-Key", "")
	if login.Status != 200 {
		t.Fatalf("login: %d %s", login.Status, login.Body)
	}
	tok := login.Map()["access_token"].(string)

	// Another organization's members, roles, invitations and keys are
	// answered as missing, never 403, and stay untouched.
	role := s.Do("POST", "/api/v1/orgs/current/roles", map[string]any{"display_name": "Team role", "description": "",
		"permissions": []string{"deployments:read"}}, "X-Api-Key", teamKey).Map()["id"].(string)
	invite := s.Do("POST", "/api/v1/orgs/current/members", map[string]any{"email": "later@example.com"}, "X-Api-Key", teamKey).Map()["id"].(string)
	svc := s.Do("POST", "/api/v1/orgs/current/service-keys", map[string]any{}, "X-Api-Key", teamKey).Map()["id"].(string)
	for _, req := range []struct {
		method, path string
		body         any
	}{
		{"PATCH", "/api/v1/orgs/current/members/" + memberID, map[string]any{"full_name": "x"}},
		{"DELETE", "/api/v1/orgs/current/members/" + memberID, nil},
		{"DELETE", "/api/v1/orgs/current/members/" + invite + "/pending", nil},
		{"PATCH", "/api/v1/orgs/current/roles/" + role, map[string]any{"display_name": "x", "description": "", "permissions": []string{}}},
		{"DELETE", "/api/v1/orgs/current/roles/" + role, nil},
		{"DELETE", "/api/v1/orgs/current/service-keys/" + svc, nil},
		{"PATCH", "/api/v1/workspaces/current/members/" + memberID, map[string]any{"role_id": wsAdmin}},
		{"DELETE", "/api/v1/workspaces/current/members/" + memberID, nil},
	} {
		if r := s.Do(req.method, req.path, req.body); r.Status != 404 {
			t.Fatalf("%s %s from another organization: %d %s", req.method, req.path, r.Status, r.Body)
		}
	}
	if r := s.Do("POST", "/api/v1/workspaces/current/members", map[string]any{"user_id": memberID}); r.Status != 404 {
		t.Fatalf("adding another organization's member: %d %s", r.Status, r.Body)
	}
	if r := s.Do("POST", "/api/v1/orgs/current/members/basic/batch", []any{map[string]any{"email": "z@example.com", "workspace_role_id": role}}); r.Status != 422 {
		t.Fatalf("another organization's role: %d %s", r.Status, r.Body)
	}
	members := string(s.Do("GET", "/api/v1/orgs/current/members", nil).Body)
	if strings.Contains(members, "wsadmin@example.com") || strings.Contains(members, "later@example.com") {
		t.Fatalf("the Default organization lists Team's people: %s", members)
	}
	q := "/api/v1/audit-logs?start_time=2000-01-01T00:00:00Z&end_time=2100-01-01T00:00:00Z"
	for _, headers := range [][]string{
		{"X-Api-Key", "", "Authorization", "Bearer " + tok, "X-Organization-Id", team},
		{"X-Api-Key", s.Do("POST", "/api/v1/api-key", map[string]any{}, "X-Api-Key", teamKey).Map()["key"].(string), "X-Organization-Id", team},
	} {
		r := s.Do("GET", q, nil, headers...)
		if r.Status != 403 || !strings.Contains(string(r.Body), "organization:manage") {
			t.Fatalf("workspace-only role: %d %s", r.Status, r.Body)
		}
	}
	// The session user is a workspace Admin indeed: it may create service keys there.
	if r := s.Do("POST", "/api/v1/api-key", map[string]any{}, "X-Api-Key", "", "Authorization", "Bearer "+tok, "X-Organization-Id", team); r.Status != 200 {
		t.Fatalf("workspace Admin creating a service key: %d %s", r.Status, r.Body)
	}
}
