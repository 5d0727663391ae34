package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"slipway/server/apptest"
	"slipway/server/servertest"
)

// TestProxyStripsSlipwayCredentials: whatever credential the caller used
// with Slipway (an API key with workspace and organization headers, a
// personal access token or a login session as a bearer token), none of it
// reaches the deployment's code. An Authorization header Slipway did not
// consume (the caller authenticated with X-Api-Key) passes only to a
// deployment that opted in with the slipway.dev/forward-authorization
// annotation.
func TestProxyStripsSlipwayCredentials(t *testing.T) {
	s := apptest.New(t, nil)
	echo := servertest.HeaderEcho(t)
	dep := servertest.EchoDeployment(t, s, "echo", echo, nil)
	ws := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["tenant_id"].(string)

	pat := s.Do("POST", "/api/v1/orgs/current/personal-access-tokens", map[string]any{"description": "ci"})
	if pat.Status != 200 {
		t.Fatalf("create a personal access token: %d %s", pat.Status, pat.Body)
	}
	patKey := pat.Map()["key"].(string)
	orgID := s.Do("GET", "/api/v1/orgs/current/info", nil).Map()["id"].(string)

	received := func(t *testing.T, headers ...string) http.Header {
		t.Helper()
		r := servertest.Do(t, "GET", s.URL+"/agents/echo/whoami", nil, headers...)
		if r.Status != 200 {
			t.Fatalf("proxy: %d %s", r.Status, r.Body)
		}
		var h http.Header
		if err := json.Unmarshal(r.Body, &h); err != nil {
			t.Fatalf("echo answer %s: %v", r.Body, err)
		}
		return h
	}
	leaked := func(h http.Header, secrets ...string) []string {
		var out []string
		for name, vals := range h {
			for _, v := range vals {
				for _, sec := range secrets {
					if sec != "" && strings.Contains(v, sec) {
						out = append(out, name+": "+v)
					}
				}
			}
		}
		for _, name := range []string{"X-Api-Key", "X-Tenant-Id", "X-Organization-Id"} {
			if h.Get(name) != "" {
				out = append(out, name+": "+h.Get(name))
			}
		}
		return out
	}

	cases := []struct {
		name     string
		headers  []string
		wantAuth string // Authorization the agent must see ("" = none)
	}{
		{"api key with workspace and organization", []string{"X-Api-Key", s.Key, "X-Tenant-Id", ws, "X-Organization-Id", orgID}, ""},
		{"personal access token as bearer", []string{"X-Api-Key", "", "Authorization", "Bearer " + patKey, "X-Tenant-Id", ws}, ""},
		{"personal access token as lower-case bearer", []string{"X-Api-Key", "", "Authorization", "bearer " + patKey, "X-Tenant-Id", ws}, ""},
		{"personal access token as api key", []string{"X-Api-Key", patKey, "X-Tenant-Id", ws}, ""},
		{"api key and an agent token, not opted in", []string{"X-Api-Key", s.Key, "X-Tenant-Id", ws, "Authorization", "Bearer agent-token"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := received(t, tc.headers...)
			if l := leaked(h, s.Key, patKey, ws, orgID); len(l) > 0 {
				t.Fatalf("the agent received Slipway credentials: %v", l)
			}
			if got := h.Get("Authorization"); got != tc.wantAuth {
				t.Fatalf("Authorization at the agent = %q, want %q", got, tc.wantAuth)
			}
		})
	}

	// A login session's token is a bearer credential too: an
	// Organization Admin invited, then added as a basic-auth user.
	var admin string
	for _, role := range s.Do("GET", "/api/v1/orgs/current/roles", nil).JSON().([]any) {
		if role.(map[string]any)["display_name"] == "Organization Admin" {
			admin = role.(map[string]any)["id"].(string)
		}
	}
	if r := s.Do("POST", "/api/v1/orgs/current/members", map[string]any{"email": "ops@example.com", "role_id": admin}); r.Status != 200 {
		t.Fatalf("invite: %d %s", r.Status, r.Body)
	}
	if r := s.Do("POST", "/api/v1/orgs/current/members/basic/batch", []any{map[string]any{"email": "ops@example.com", "password": "operator-password-1"}}); r.Status != 200 {
		t.Fatalf("add basic-auth user: %d %s", r.Status, r.Body)
	}
	login := s.Do("POST", "/api/v1/login", map[string]any{"email": "ops@example.com", "password": "operator-password-1"}, "X-Api-Key", "")
	tok, _ := login.Map()["access_token"].(string)
	if tok == "" {
		t.Fatalf("login: %d %s", login.Status, login.Body)
	}
	for _, org := range []string{"X-Organization-Id", "X-Tenant-Id"} {
		val := orgID
		if org == "X-Tenant-Id" {
			val = ws
		}
		h := received(t, "X-Api-Key", "", "Authorization", "Bearer "+tok, org, val, "X-Tenant-Id", ws)
		if l := leaked(h, tok, ws, orgID); len(l) > 0 || h.Get("Authorization") != "" {
			t.Fatalf("the agent received the session token: %v %q", l, h.Get("Authorization"))
		}
	}

	// The deployment opts in: the caller's own Authorization passes when
	// Slipway authenticated the X-Api-Key, never a bearer Slipway used.
	optIn := map[string]any{"source_config": map[string]any{"resource_spec": map[string]any{
		"annotations": map[string]any{"slipway.dev/forward-authorization": "true"}}}}
	if r := s.Do("PATCH", "/v2/deployments/"+dep, optIn); r.Status != 200 {
		t.Fatalf("opt in: %d %s", r.Status, r.Body)
	}
	servertest.WaitRevision(t, s, dep, s.Do("GET", "/v2/deployments/"+dep, nil).Map()["latest_revision_id"].(string), "DEPLOYED")
	if h := received(t, "X-Api-Key", s.Key, "X-Tenant-Id", ws, "Authorization", "Bearer agent-token"); h.Get("Authorization") != "Bearer agent-token" || len(leaked(h, s.Key, ws)) > 0 {
		t.Fatalf("opted in: the agent got Authorization %q and %v", h.Get("Authorization"), leaked(h, s.Key, ws))
	}
	if h := received(t, "X-Api-Key", "", "Authorization", "Bearer "+patKey, "X-Tenant-Id", ws); h.Get("Authorization") != "" {
		t.Fatalf("opted in: the bearer token Slipway consumed reached the agent: %q", h.Get("Authorization"))
	}

	// The annotation takes "true" or "false" only.
	bad := map[string]any{"source_config": map[string]any{"resource_spec": map[string]any{
		"annotations": map[string]any{"slipway.dev/forward-authorization": "yes"}}}}
	if r := s.Do("PATCH", "/v2/deployments/"+dep, bad); r.Status != 422 || !strings.Contains(string(r.Body), "forward-authorization") {
		t.Fatalf("bad annotation value: %d %s", r.Status, r.Body)
	}
}

// TestProxyDropsDashboardCookies: a browser signed in to the dashboard
// reaches a deployment with its session cookie, which must not reach the
// deployment's code (the agent could replay it against Slipway); the
// deployment's own cookies pass. What the deployment serves under
// /agents/ is sandboxed, since it shares the dashboard's origin; on its
// custom_url it is not.
func TestProxyDropsDashboardCookies(t *testing.T) {
	s := apptest.New(t, nil)
	servertest.EchoDeployment(t, s, "echo", servertest.HeaderEcho(t), nil)
	r := s.Do("POST", "/ui/session", map[string]any{"api_key": s.Key}, "X-Api-Key", "")
	if r.Status != 200 {
		t.Fatalf("sign in: %d %s", r.Status, r.Body)
	}
	var cookies []string
	for _, c := range r.Header.Values("Set-Cookie") {
		if pair, _, _ := strings.Cut(c, ";"); !strings.HasSuffix(pair, "=") {
			cookies = append(cookies, pair)
		}
	}
	cookies = append(cookies, "theme=dark")
	r = servertest.Do(t, "GET", s.URL+"/agents/echo/whoami", nil, "X-Api-Key", "", "Cookie", strings.Join(cookies, "; "))
	if r.Status != 200 {
		t.Fatalf("proxy with the dashboard's cookie: %d %s", r.Status, r.Body)
	}
	var h http.Header
	if err := json.Unmarshal(r.Body, &h); err != nil {
		t.Fatalf("echo answer %s: %v", r.Body, err)
	}
	if got := h.Get("Cookie"); got != "theme=dark" {
		t.Errorf("Cookie at the agent = %q, want only the deployment's own %q", got, "theme=dark")
	}
	if strings.Contains(string(r.Body), s.Key) {
		t.Errorf("the agent received the key: %s", r.Body)
	}
	if csp := r.Header.Get("Content-Security-Policy"); csp != "sandbox" {
		t.Errorf("Content-Security-Policy of a proxied answer = %q, want sandbox", csp)
	}
	// On its custom_url a deployment has an origin of its own: its pages
	// are not sandboxed.
	servertest.EchoDeployment(t, s, "own-host", servertest.HeaderEcho(t), map[string]any{"custom_url": "https://own-host.example.com"})
	req, err := http.NewRequest("GET", s.URL+"/whoami", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "own-host.example.com"
	req.Header.Set("X-Api-Key", s.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Security-Policy") != "" {
		t.Errorf("by custom_url: %d, Content-Security-Policy %q, want 200 and none", resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
	}
}
