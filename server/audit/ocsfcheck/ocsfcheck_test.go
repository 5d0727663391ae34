package ocsfcheck

import (
	"encoding/json"
	"strings"
	"testing"
)

const valid = `{
 "activity_id": 1, "activity_name": "Create", "category_uid": 6, "category_name": "Application Activity",
 "class_uid": 6003, "class_name": "API Activity", "type_uid": 600301, "type_name": "API Activity: Create",
 "severity_id": 1, "severity": "Informational", "time": 1795369985431, "status_id": 1, "status": "Success",
 "metadata": {"version": "1.7.0", "uid": "e1", "product": {"name": "Slipway", "vendor_name": "Slipway", "version": "1"}},
 "actor": {"user": {"uid": "u1", "credential_uid": null, "type_id": 1, "type": "User"}},
 "api": {"operation": "create_api_key", "request": {"uid": "r1"}, "response": {"code": 200}, "service": {"name": "slipway"}},
 "src_endpoint": {"ip": "127.0.0.1", "port": 4000},
 "http_request": {"http_method": "POST", "url": {"path": "/x"}},
 "http_response": {"code": 200},
 "resources": [{"uid": "k1", "type": "api_key"}],
 "unmapped": {"anything": {"goes": true}}
}`

// TestValidator proves the checker can fail: each mutation of a valid
// event must be reported.
func TestValidator(t *testing.T) {
	s, err := Load(Dir())
	if err != nil {
		t.Skipf("OCSF schema not found beside the repository: %v", err)
	}
	cases := []struct {
		name   string
		mutate func(e map[string]any)
		want   string // "" = valid
	}{
		{"valid", func(map[string]any) {}, ""},
		{"missing time", func(e map[string]any) { delete(e, "time") }, "time: required"},
		{"missing metadata.version", func(e map[string]any) { delete(e["metadata"].(map[string]any), "version") }, "metadata.version"},
		{"missing api.operation", func(e map[string]any) { delete(e["api"].(map[string]any), "operation") }, "api.operation: required"},
		{"bad enum", func(e map[string]any) { e["status_id"] = 7.0 }, "status_id: 7 is not in the enum"},
		{"caption mismatch", func(e map[string]any) { e["severity"] = "Critical" }, "severity"},
		{"type_uid", func(e map[string]any) { e["type_uid"] = 600303.0 }, "type_uid"},
		{"float time", func(e map[string]any) { e["time"] = 1.5 }, "time: must be"},
		{"string port", func(e map[string]any) { e["src_endpoint"].(map[string]any)["port"] = "80" }, "src_endpoint.port"},
		{"empty endpoint", func(e map[string]any) { e["src_endpoint"] = map[string]any{} }, "at least one"},
		{"unknown attribute", func(e map[string]any) { e["colour"] = "red" }, "colour: not an attribute"},
		{"resources not array", func(e map[string]any) { e["resources"] = map[string]any{"uid": "x"} }, "resources: must be an array"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var e map[string]any
			_ = json.Unmarshal([]byte(valid), &e)
			tc.mutate(e)
			v := s.ValidateAPIActivity(e)
			if tc.want == "" {
				if len(v) != 0 {
					t.Fatalf("valid event rejected: %v", v)
				}
				return
			}
			if !strings.Contains(strings.Join(v, "\n"), tc.want) {
				t.Fatalf("violations %v do not mention %q", v, tc.want)
			}
		})
	}
}
