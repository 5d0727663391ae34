package orgapi_test

import (
	"strings"
	"testing"
)

// TestBadInputNeverFails sends malformed bodies and path parameters to
// every organization-API and tracing-project endpoint that takes input and
// checks each answer is a 4xx with the documented error shape: never a 500,
// never a dropped connection (a panic).
func TestBadInputNeverFails(t *testing.T) {
	s := auditServer(t)
	id := "0190f0f0-0000-7000-8000-000000000000"
	routes := []struct{ method, path string }{
		{"POST", "/api/v1/login"},
		{"POST", "/api/v1/orgs/current/members"},
		{"POST", "/api/v1/orgs/current/members/batch"},
		{"POST", "/api/v1/orgs/current/members/basic/batch"},
		{"PATCH", "/api/v1/orgs/current/members/" + id},
		{"PATCH", "/api/v1/orgs/current/members/%2e%2e"},
		{"DELETE", "/api/v1/orgs/current/members/x/pending"},
		{"PATCH", "/api/v1/orgs/members/basic"},
		{"POST", "/api/v1/orgs/current/roles"},
		{"PATCH", "/api/v1/orgs/current/roles/" + id},
		{"PATCH", "/api/v1/orgs/current/roles/x"},
		{"POST", "/api/v1/workspaces/current/members"},
		{"POST", "/api/v1/workspaces/current/members/batch"},
		{"PATCH", "/api/v1/workspaces/current/members/" + id},
		{"PATCH", "/api/v1/workspaces/current/members/x"},
		{"POST", "/api/v1/workspaces/current/secrets"},
		{"PUT", "/api/v1/orgs/ttl-settings"},
		{"PATCH", "/api/v1/orgs/current/info"},
		{"POST", "/api/v1/orgs/current/service-keys"},
		{"DELETE", "/api/v1/orgs/current/service-keys/x"},
		{"POST", "/api/v1/orgs/current/personal-access-tokens"},
		{"DELETE", "/api/v1/orgs/current/personal-access-tokens/x"},
		{"POST", "/api/v1/api-key"},
		{"POST", "/api/v1/api-key/current"},
		{"POST", "/api/v1/workspaces"},
		{"PATCH", "/api/v1/workspaces/x"},
		{"PATCH", "/api/v1/sessions/" + id},
		{"PATCH", "/api/v1/sessions/x"},
		{"DELETE", "/api/v1/sessions?session_ids=x&session_ids="},
		{"GET", "/api/v1/audit-logs?start_time=%ff&end_time=2026-13-45&limit=1e9&cursor=%00"},
	}
	bodies := []string{"", "{", "null", "[]", "{}", "[{}]", `"text"`, "123", "[1, 2]", `{"email": 5}`,
		`[{"email": null, "workspace_ids": "x"}]`, `{"role_id": "not-a-uuid"}`, `{"permissions": {"a": 1}}`,
		`{"default_trace_tier": "longlived", "audit_log_retention_days": 1e40}`, `[{"key": "K", "value": 7}]`,
		`{"display_name": "` + strings.Repeat("x", 5000) + `"}`, strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
		`{"expires_at": "yesterday"}`, `{"name": null, "description": 1}`, "\xff\xfe"}
	for _, rt := range routes {
		for _, b := range bodies {
			var body any
			if b != "" {
				body = b
			}
			r := s.Do(rt.method, rt.path, body)
			if r.Status >= 500 || r.Status < 400 && r.Status != 200 {
				t.Fatalf("%s %s with %.40q: status %d %s", rt.method, rt.path, b, r.Status, r.Body)
			}
			if r.Status == 422 {
				d, ok := r.Map()["detail"].([]any)
				if !ok || len(d) == 0 {
					t.Fatalf("%s %s with %.40q: 422 without a validation detail: %s", rt.method, rt.path, b, r.Body)
				}
				for _, e := range d {
					m := e.(map[string]any)
					if _, ok := m["loc"].([]any); !ok || m["msg"] == "" || m["type"] == "" {
						t.Fatalf("%s %s: malformed validation error %v", rt.method, rt.path, m)
					}
				}
			} else if r.Status >= 400 {
				if _, ok := r.Map()["detail"].(string); !ok {
					t.Fatalf("%s %s with %.40q: %d without a detail: %s", rt.method, rt.path, b, r.Status, r.Body)
				}
			}
		}
	}
	// The server is still healthy.
	mustStatus(t, s.Do("GET", "/v2/deployments", nil), 200)
}
