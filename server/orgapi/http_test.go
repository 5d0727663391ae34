package orgapi_test

import (
	"strings"
	"testing"

	"slipway/server/apptest"
	"slipway/server/servertest"
)

func mustStatus(t *testing.T, r *servertest.Response, want int) {
	t.Helper()
	if r.Status != want {
		t.Fatalf("status %d, want %d: %s", r.Status, want, r.Body)
	}
}

func detail(t *testing.T, r *servertest.Response) string {
	t.Helper()
	d, ok := r.Map()["detail"].(string)
	if !ok || d == "" {
		t.Fatalf("no string detail in %s", r.Body)
	}
	return d
}

func deployment(name string) map[string]any {
	return map[string]any{"name": name, "source": "internal_docker", "source_config": map[string]any{},
		"source_revision_config": map[string]any{"image_uri": "img:1"}, "secrets": []any{}}
}

func TestAuthentication(t *testing.T) {
	s := apptest.New(t, nil)
	cases := []struct {
		name    string
		headers []string
		want    int
	}{
		{"no credentials", []string{"X-Api-Key", ""}, 401},
		{"unknown key", []string{"X-Api-Key", "slw_sk_0000"}, 401},
		{"unknown bearer", []string{"X-Api-Key", "", "Authorization", "Bearer nope"}, 401},
		{"valid key", nil, 200},
		{"tenant not a uuid", []string{"X-Tenant-Id", "nope"}, 403},
		{"tenant of nobody", []string{"X-Tenant-Id", "0190f0f0-0000-7000-8000-000000000000"}, 403},
		{"other organization", []string{"X-Organization-Id", "0190f0f0-0000-7000-8000-000000000000"}, 403},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := s.Do("GET", "/v2/deployments", nil, tc.headers...)
			mustStatus(t, r, tc.want)
			if tc.want != 200 {
				detail(t, r)
			}
		})
	}
}

// TestKeysAndIsolation: workspace service keys see only their workspace;
// another workspace's resources are answered as missing, never 403.
func TestKeysAndIsolation(t *testing.T) {
	s := apptest.New(t, nil)
	r := s.Do("POST", "/api/v1/workspaces", map[string]any{"display_name": "Team B"})
	mustStatus(t, r, 200)
	wsB := r.Map()["id"].(string)
	if ws := s.Do("GET", "/api/v1/workspaces", nil).JSON().([]any); len(ws) != 2 {
		t.Fatalf("workspaces: %v", ws)
	}

	// A key for workspace B, created by the org admin naming B.
	r = s.Do("POST", "/api/v1/api-key", map[string]any{"description": "ci for B"}, "X-Tenant-Id", wsB)
	mustStatus(t, r, 200)
	keyB, keyBID := r.Map()["key"].(string), r.Map()["id"].(string)
	if !strings.HasPrefix(keyB, "slw_sk_") {
		t.Fatalf("key %q", keyB)
	}
	asB := func(method, path string, body any, h ...string) *servertest.Response {
		return s.Do(method, path, body, append([]string{"X-Api-Key", keyB}, h...)...)
	}

	depA := s.Do("POST", "/v2/deployments", deployment("in-a")).Map()["id"].(string)
	r = asB("POST", "/v2/deployments", deployment("in-b"))
	mustStatus(t, r, 201)
	if r.Map()["tenant_id"] != wsB {
		t.Fatalf("tenant_id %v, want %s", r.Map()["tenant_id"], wsB)
	}
	// Same name in another workspace is fine.
	mustStatus(t, asB("POST", "/v2/deployments", deployment("in-a")), 201)

	for _, tc := range []struct{ method, path string }{
		{"GET", "/v2/deployments/" + depA},
		{"PATCH", "/v2/deployments/" + depA},
		{"DELETE", "/v2/deployments/" + depA},
		{"GET", "/v2/deployments/" + depA + "/revisions"},
		{"POST", "/v2/deployments/" + depA + "/upload-url"},
	} {
		r := asB(tc.method, tc.path, map[string]any{})
		mustStatus(t, r, 404)
		if !strings.Contains(detail(t, r), "not found") {
			t.Fatalf("%s %s: %s", tc.method, tc.path, r.Body)
		}
	}
	if got := asB("GET", "/v2/deployments", nil).Map()["resources"].([]any); len(got) != 2 {
		t.Fatalf("B sees %d deployments", len(got))
	}
	// A workspace key cannot name another workspace, nor manage the org.
	mustStatus(t, asB("GET", "/v2/deployments", nil, "X-Tenant-Id", s.Do("GET", "/v2/deployments/"+depA, nil).Map()["tenant_id"].(string)), 403)
	mustStatus(t, asB("POST", "/api/v1/workspaces", map[string]any{"display_name": "x"}), 403)

	// A read-only key reads but cannot write.
	r = s.Do("POST", "/api/v1/api-key", map[string]any{"read_only": true})
	mustStatus(t, r, 200)
	ro := r.Map()["key"].(string)
	mustStatus(t, s.Do("GET", "/v2/deployments", nil, "X-Api-Key", ro), 200)
	detail(t, mustForbidden(t, s.Do("POST", "/v2/deployments", deployment("ro"), "X-Api-Key", ro)))

	// Listing never shows a key, only its short form.
	list := s.Do("GET", "/api/v1/api-key", nil, "X-Tenant-Id", wsB)
	mustStatus(t, list, 200)
	if strings.Contains(string(list.Body), keyB) || strings.Contains(string(list.Body), `"key"`) {
		t.Fatalf("key listed: %s", list.Body)
	}
	// Revoking works and the key stops authenticating.
	mustStatus(t, s.Do("DELETE", "/api/v1/api-key/"+keyBID, nil, "X-Tenant-Id", wsB), 200)
	mustStatus(t, asB("GET", "/v2/deployments", nil), 401)
	mustStatus(t, s.Do("DELETE", "/api/v1/api-key/"+keyBID, nil, "X-Tenant-Id", wsB), 404)

	// Workspaces with deployments are not deleted from under them.
	mustStatus(t, s.Do("DELETE", "/api/v1/workspaces/"+wsB, nil), 400)
	mustStatus(t, s.Do("PATCH", "/api/v1/workspaces/"+wsB, map[string]any{"display_name": "Team Bee"}), 200)
	mustStatus(t, s.Do("PATCH", "/api/v1/workspaces/"+wsB, map[string]any{"display_name": ""}), 422)

	for _, k := range []string{keyB, ro, s.Key} {
		if strings.Contains(s.Logs(), k) && k != s.Key {
			t.Fatalf("key %s… appears in the log", k[:10])
		}
	}
}

func mustForbidden(t *testing.T, r *servertest.Response) *servertest.Response {
	t.Helper()
	mustStatus(t, r, 403)
	return r
}

// TestPersonalAccessTokens: PATs are shown once, work as Bearer and X-Api-Key,
// and are listed and revoked per user.
func TestPersonalAccessTokens(t *testing.T) {
	s := apptest.New(t, nil)
	r := s.Do("POST", "/api/v1/api-key/current", map[string]any{"description": "laptop"})
	mustStatus(t, r, 200)
	pat, id := r.Map()["key"].(string), r.Map()["id"].(string)
	mustStatus(t, s.Do("GET", "/v2/deployments", nil, "X-Api-Key", "", "Authorization", "Bearer "+pat), 200)
	mustStatus(t, s.Do("GET", "/v2/deployments", nil, "X-Api-Key", pat), 200)
	list := s.Do("GET", "/api/v1/api-key/current", nil)
	mustStatus(t, list, 200)
	if items := list.JSON().([]any); len(items) != 1 || strings.Contains(string(list.Body), pat) {
		t.Fatalf("PAT list: %s", list.Body)
	}
	// Service keys are not PATs: the workspace list does not show it.
	if strings.Contains(string(s.Do("GET", "/api/v1/api-key", nil).Body), id) {
		t.Fatal("PAT listed as a service key")
	}
	mustStatus(t, s.Do("DELETE", "/api/v1/api-key/current/"+id, nil), 200)
	mustStatus(t, s.Do("GET", "/v2/deployments", nil, "X-Api-Key", pat), 401)

	// A service key has no user to own a PAT.
	sk := s.Do("POST", "/api/v1/api-key", map[string]any{}).Map()["key"].(string)
	mustStatus(t, s.Do("POST", "/api/v1/api-key/current", map[string]any{}, "X-Api-Key", sk), 403)
	// Bad bodies are 422s.
	mustStatus(t, s.Do("POST", "/api/v1/api-key", map[string]any{"role_id": "Overlord"}), 422)
	mustStatus(t, s.Do("POST", "/api/v1/api-key", map[string]any{"expires_at": "2001-01-01T00:00:00Z"}), 422)
	mustStatus(t, s.Do("POST", "/api/v1/api-key", map[string]any{"bogus": 1}), 422)
	mustStatus(t, s.Do("DELETE", "/api/v1/api-key/zzz", nil), 422)
}

func TestBootstrapKeyFromEnvironment(t *testing.T) {
	key := "slw_sk_" + strings.Repeat("ab", 20)
	s := apptest.New(t, map[string]string{"SLIPWAY_BOOTSTRAP_API_KEY": key})
	mustStatus(t, s.Do("GET", "/v2/deployments", nil, "X-Api-Key", key), 200)
	if strings.Contains(s.Logs(), key) {
		t.Fatal("bootstrap key logged")
	}
}

// TestInitialKeyShownOnce: the generated key is logged at first start only.
func TestInitialKeyShownOnce(t *testing.T) {
	s := apptest.New(t, nil)
	if !strings.Contains(s.Logs(), s.Key) {
		t.Fatal("initial key not shown at first start")
	}
	s.Restart() // the harness keeps each process's output separately
	if strings.Contains(s.Logs(), s.Key) {
		t.Fatal("initial key shown again after restart")
	}
	mustStatus(t, s.Do("GET", "/v2/deployments", nil), 200)
}
