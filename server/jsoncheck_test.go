package server_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"slipway/server/apptest"
	"slipway/server/servertest"
)

// validationLoc returns the loc and message of a 422's single error,
// failing otherwise.
func validationLoc(t *testing.T, r *servertest.Response) (loc, msg string) {
	t.Helper()
	var body struct {
		Detail []struct {
			Loc  []any  `json:"loc"`
			Msg  string `json:"msg"`
			Type string `json:"type"`
		} `json:"detail"`
	}
	if r.Status != 422 || json.Unmarshal(r.Body, &body) != nil || len(body.Detail) != 1 || body.Detail[0].Msg == "" {
		t.Fatalf("want a 422 with one error, got %d %.300s", r.Status, r.Body)
	}
	return fmt.Sprint(body.Detail[0].Loc...), body.Detail[0].Msg
}

// TestAPIsRefuseAmbiguousJSON sends the control plane and the organization
// API bodies that encoding/json would silently reinterpret (a duplicate
// key keeps the last value, invalid UTF-8 becomes U+FFFD) or that nest too
// deeply: each is a 422 naming where, and nothing is stored or changed.
func TestAPIsRefuseAmbiguousJSON(t *testing.T) {
	s := apptest.New(t, nil)
	create := `{"name":"ok-agent","source":"internal_source","source_config":{},` +
		`"source_revision_config":{"graph_config_path":"langgraph.json"},"secrets":[{"name":"A","value":"v"}]}`
	deep := strings.Repeat(`{"a":`, 300) + "1" + strings.Repeat("}", 300)
	cases := []struct {
		name, method, path, body string
		loc                      string // fmt.Sprint of the loc, or a prefix ending in "…"
	}{
		{"duplicate name", "POST", "/v2/deployments", strings.Replace(create, `"name":"ok-agent"`, `"name":"ok-agent","name":"other"`, 1), "bodyname"},
		{"duplicate nested key", "POST", "/v2/deployments", strings.Replace(create, `"value":"v"`, `"value":"v","value":"w"`, 1), "bodysecrets0value"},
		{"invalid UTF-8 secret value", "POST", "/v2/deployments", strings.Replace(create, `"value":"v"`, "\"value\":\"v\xff\"", 1), "bodysecrets0value"},
		{"lone surrogate secret value", "POST", "/v2/deployments", strings.Replace(create, `"value":"v"`, `"value":"\ud800"`, 1), "bodysecrets0value"},
		{"deep body", "POST", "/v2/deployments", strings.Replace(create, `"source_config":{}`, `"source_config":`+deep, 1), "bodysource_config…"},
		{"org API duplicate key", "PUT", "/api/v1/orgs/ttl-settings", `{"default_trace_tier":"longlived","audit_log_retention_days":30,"audit_log_retention_days":400}`, "bodyaudit_log_retention_days"},
		{"org API invalid UTF-8 secret", "POST", "/api/v1/workspaces/current/secrets", "[{\"key\":\"OK_KEY\",\"value\":\"\xc3\x28\"}]", "body0value"},
		{"org API deep body", "POST", "/api/v1/workspaces", `{"display_name":"w","x":` + deep + `}`, "bodyx…"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			loc, msg := validationLoc(t, s.Do(tc.method, tc.path, tc.body))
			if p, ok := strings.CutSuffix(tc.loc, "…"); ok && !strings.HasPrefix(loc, p) || !ok && loc != tc.loc {
				t.Fatalf("loc %q, want %q", loc, tc.loc)
			}
			if strings.HasPrefix(tc.name, "deep") || strings.HasSuffix(tc.name, "deep body") {
				if !strings.Contains(msg, "nesting") {
					t.Fatalf("refused for %q, not for its depth", msg)
				}
			}
		})
	}
	if l := s.Do("GET", "/v2/deployments", nil).Map()["resources"].([]any); len(l) != 0 {
		t.Fatalf("a refused create was stored: %v", l)
	}
	if r := s.Do("GET", "/api/v1/workspaces/current/secrets", nil); strings.Contains(string(r.Body), "OK_KEY") {
		t.Fatalf("a refused secret was stored: %s", r.Body)
	}
	if r := s.Do("GET", "/api/v1/orgs/ttl-settings", nil); strings.Contains(string(r.Body), `"audit_log_retention_days":400`) {
		t.Fatalf("a refused setting was stored: %s", r.Body)
	}
	// The same bodies without the problem are accepted.
	if r := s.Do("POST", "/v2/deployments", create); r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
}
