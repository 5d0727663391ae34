package orgapi_test

import (
	"testing"

	"slipway/server/apptest"
	"slipway/server/servertest"
)

// basicUser adds a basic-auth user with the given organization role (by
// display name) and password, and returns its identity id.
func basicUser(t *testing.T, s *servertest.Server, roles map[string]string, email, orgRole, password string) string {
	t.Helper()
	r := s.Do("POST", "/api/v1/orgs/current/members/basic/batch", []any{map[string]any{
		"email": email, "password": password, "role_id": roles[orgRole]}})
	mustStatus(t, r, 200)
	return r.JSON().([]any)[0].(map[string]any)["id"].(string)
}

// TestReadOnlyCredentialCannotEscalate replays the attack: a read-only
// personal access token minted a writable one, a writable service key,
// and changed its owner's password. Every non-GET route refuses a
// read-only credential with 403, and nothing it tried is stored.
func TestReadOnlyCredentialCannotEscalate(t *testing.T) {
	s := apptest.New(t, nil)
	roles := roleIDs(t, s)
	const ownerPW = "owner-correct-horse-battery"
	basicUser(t, s, roles, "owner@example.com", "Organization Admin", ownerPW)
	session := login(t, s, "owner@example.com", ownerPW)
	asSession := []string{"X-Api-Key", "", "Authorization", "Bearer " + session}
	r := s.Do("POST", "/api/v1/orgs/current/personal-access-tokens", map[string]any{"read_only": true}, asSession...)
	mustStatus(t, r, 200)
	ro := r.Map()["key"].(string)
	asRO := []string{"X-Api-Key", ro}

	attacks := []struct {
		method, path string
		body         any
	}{
		{"POST", "/api/v1/orgs/current/personal-access-tokens", map[string]any{"read_only": false}},
		{"POST", "/api/v1/api-key/current", map[string]any{}},
		{"PATCH", "/api/v1/orgs/members/basic", map[string]any{"password": "attacker-chosen-password"}},
		{"POST", "/api/v1/api-key", map[string]any{}},
		{"POST", "/api/v1/orgs/current/service-keys", map[string]any{}},
		{"POST", "/v2/deployments", deployment("escalated")},
		{"POST", "/api/v1/logout", nil},
		{"PATCH", "/api/v1/orgs/current/info", map[string]any{"display_name": "Hijacked"}},
		{"POST", "/api-host/api/v1/orgs/current/personal-access-tokens", map[string]any{}},
	}
	for _, a := range attacks {
		r := s.Do(a.method, a.path, a.body, asRO...)
		mustStatus(t, r, 403)
		detail(t, r)
	}
	// Reads still work, including the POST routes declared read-only.
	mustStatus(t, s.Do("GET", "/v2/deployments", nil, asRO...), 200)
	mustStatus(t, s.Do("GET", "/api/v1/orgs/current/personal-access-tokens", nil, asRO...), 200)
	if r := s.Do("POST", "/v1/projects/0190f0f0-0000-7000-8000-000000000000/revisions/0190f0f0-0000-7000-8000-000000000001/build_logs",
		map[string]any{}, asRO...); r.Status == 401 || r.Status == 403 {
		t.Fatalf("a read-only credential is refused a read declared POST: %d %s", r.Status, r.Body)
	}

	// Nothing was minted and the owner is not locked out.
	list := s.Do("GET", "/api/v1/orgs/current/personal-access-tokens", nil, asSession...)
	mustStatus(t, list, 200)
	if n := len(list.JSON().([]any)); n != 1 {
		t.Fatalf("the owner has %d tokens, want the read-only one only: %s", n, list.Body)
	}
	login(t, s, "owner@example.com", ownerPW)
	mustStatus(t, s.Do("GET", "/api/v1/orgs/current/info", nil, asSession...), 200)
}

// TestCredentialsMintOnlyWithinTheirRights: a credential creates others
// only within its own rights.
func TestCredentialsMintOnlyWithinTheirRights(t *testing.T) {
	s := apptest.New(t, nil)
	roles := roleIDs(t, s)
	key := func(body map[string]any, as ...string) string {
		t.Helper()
		r := s.Do("POST", "/api/v1/api-key", body, as...)
		mustStatus(t, r, 200)
		return r.Map()["key"].(string)
	}
	wsAdmin := key(map[string]any{"role_id": "Admin"})
	wsEditor := key(map[string]any{"role_id": "Editor"})
	roAdmin := key(map[string]any{"read_only": true})
	const opPW = "operator-password-long"
	basicUser(t, s, roles, "op@example.com", "Organization Operator", opPW)
	opSession := []string{"X-Api-Key", "", "Authorization", "Bearer " + login(t, s, "op@example.com", opPW)}
	cases := []struct {
		name         string
		method, path string
		body         any
		as           []string
		want         int
	}{
		{"read-only workspace key creates a workspace key", "POST", "/api/v1/api-key", map[string]any{}, []string{"X-Api-Key", roAdmin}, 403},
		{"workspace editor creates a workspace key", "POST", "/api/v1/api-key", map[string]any{}, []string{"X-Api-Key", wsEditor}, 403},
		{"workspace admin key creates an organization key", "POST", "/api/v1/orgs/current/service-keys", map[string]any{}, []string{"X-Api-Key", wsAdmin}, 403},
		{"workspace key creates a personal token", "POST", "/api/v1/api-key/current", map[string]any{}, []string{"X-Api-Key", wsAdmin}, 403},
		{"operator creates an organization admin key", "POST", "/api/v1/orgs/current/service-keys",
			map[string]any{"org_role_id": roles["Organization Admin"]}, opSession, 403},
		{"workspace admin key creates a workspace admin key", "POST", "/api/v1/api-key", map[string]any{"role_id": "Admin"}, []string{"X-Api-Key", wsAdmin}, 200},
		{"operator creates an operator key", "POST", "/api/v1/orgs/current/service-keys",
			map[string]any{"org_role_id": roles["Organization Operator"]}, opSession, 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := s.Do(tc.method, tc.path, tc.body, tc.as...)
			mustStatus(t, r, tc.want)
			if tc.want == 403 {
				detail(t, r)
			}
		})
	}
	// A personal access token carries its owner's roles, never more: the
	// operator's token cannot do what only an Admin may.
	r := s.Do("POST", "/api/v1/orgs/current/personal-access-tokens", map[string]any{}, opSession...)
	mustStatus(t, r, 200)
	opPAT := r.Map()["key"].(string)
	mustStatus(t, s.Do("POST", "/api/v1/orgs/current/service-keys", map[string]any{"org_role_id": roles["Organization Admin"]}, "X-Api-Key", opPAT), 403)
}

// TestWorkspaceRoutesGrantNoOrganizationRole replays the attack: an
// Organization User who administers a workspace invited an email through
// the workspace batch route with an Organization Operator role_id, and the
// invitee joined as Operator. Workspace routes carry workspace roles only;
// organization roles come from organization:manage, Admin from Admins,
// also when an invitation is taken up.
func TestWorkspaceRoutesGrantNoOrganizationRole(t *testing.T) {
	s := apptest.New(t, nil)
	roles := roleIDs(t, s)
	const pw = "workspace-admin-password"
	wsAdminID := basicUser(t, s, roles, "wsadmin@example.com", "Organization User", pw)
	mustStatus(t, s.Do("PATCH", "/api/v1/workspaces/current/members/"+wsAdminID, map[string]any{"role_id": roles["Admin"]}), 200)
	as := []string{"X-Api-Key", "", "Authorization", "Bearer " + login(t, s, "wsadmin@example.com", pw)}

	attempts := []struct {
		name         string
		method, path string
		body         any
		want         int
	}{
		{"batch: operator role_id beside a workspace role", "POST", "/api/v1/workspaces/current/members/batch",
			[]any{map[string]any{"email": "mallory@example.com", "role_id": roles["Organization Operator"], "workspace_role_id": roles["Viewer"]}}, 422},
		{"batch: operator role_id as the workspace role", "POST", "/api/v1/workspaces/current/members/batch",
			[]any{map[string]any{"email": "mallory@example.com", "role_id": roles["Organization Operator"]}}, 422},
		{"batch: admin workspace_role_id", "POST", "/api/v1/workspaces/current/members/batch",
			[]any{map[string]any{"email": "mallory@example.com", "workspace_role_id": roles["Organization Admin"]}}, 422},
		{"add member with an organization role", "POST", "/api/v1/workspaces/current/members",
			map[string]any{"user_id": wsAdminID, "role_id": roles["Organization Operator"]}, 422},
		{"update member to an organization role", "PATCH", "/api/v1/workspaces/current/members/" + wsAdminID,
			map[string]any{"role_id": roles["Organization Operator"]}, 422},
		{"organization invitation", "POST", "/api/v1/orgs/current/members",
			map[string]any{"email": "mallory@example.com", "role_id": roles["Organization Operator"]}, 403},
		{"organization batch invitation", "POST", "/api/v1/orgs/current/members/batch",
			[]any{map[string]any{"email": "mallory@example.com", "role_id": roles["Organization Operator"]}}, 403},
		{"basic-auth users", "POST", "/api/v1/orgs/current/members/basic/batch",
			[]any{map[string]any{"email": "mallory@example.com", "role_id": roles["Organization Operator"]}}, 403},
		{"own organization role", "PATCH", "/api/v1/orgs/current/members/" + wsAdminID,
			map[string]any{"role_id": roles["Organization Operator"]}, 403},
	}
	for _, a := range attempts {
		t.Run(a.name, func(t *testing.T) {
			r := s.Do(a.method, a.path, a.body, as...)
			mustStatus(t, r, a.want)
		})
	}
	// The workspace invitation that is allowed makes an Organization User.
	mustStatus(t, s.Do("POST", "/api/v1/workspaces/current/members/batch",
		[]any{map[string]any{"email": "mallory@example.com", "role_id": roles["Editor"]}}, as...), 200)
	r := s.Do("POST", "/api/v1/orgs/current/members/basic/batch", []any{map[string]any{"email": "mallory@example.com", "password": "mallory-password-1"}})
	mustStatus(t, r, 200)
	if role := orgRoleOf(t, s, "mallory@example.com"); role != "Organization User" {
		t.Fatalf("the invitee joined as %q", role)
	}

	// An Operator cannot take up an Admin's invitation: that would make an
	// Organization Admin whose password the Operator chose.
	const opPW = "operator-password-long"
	basicUser(t, s, roles, "op@example.com", "Organization Operator", opPW)
	op := []string{"X-Api-Key", "", "Authorization", "Bearer " + login(t, s, "op@example.com", opPW)}
	mustStatus(t, s.Do("POST", "/api/v1/orgs/current/members", map[string]any{"email": "boss@example.com", "role_id": roles["Organization Admin"]}), 200)
	r = s.Do("POST", "/api/v1/orgs/current/members/basic/batch", []any{map[string]any{"email": "boss@example.com", "password": "operator-chosen-pw"}}, op...)
	mustStatus(t, r, 403)
	detail(t, r)
	if role := orgRoleOf(t, s, "boss@example.com"); role != "" {
		t.Fatalf("boss@example.com became a member as %q", role)
	}
}

// orgRoleOf is the organization role of the member with email ("" if none).
func orgRoleOf(t *testing.T, s *servertest.Server, email string) string {
	t.Helper()
	r := s.Do("GET", "/api/v1/orgs/current/members", nil)
	mustStatus(t, r, 200)
	for _, m := range r.Map()["members"].([]any) {
		if m := m.(map[string]any); m["email"] == email {
			name, _ := m["org_role_name"].(string)
			return name
		}
	}
	return ""
}
