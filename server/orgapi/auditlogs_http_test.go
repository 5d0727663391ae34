package orgapi_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"slipway/server/apptest"
	"slipway/server/servertest"
)

func auditServer(t *testing.T) *servertest.Server {
	return apptest.New(t, map[string]string{"DEFAULT_ORG_FEATURE_CAN_USE_AUDIT_LOGS": "true"})
}

func window() (string, string) {
	now := time.Now().UTC()
	return now.Add(-time.Hour).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339)
}

func TestAuditLogQueryParameters(t *testing.T) {
	s := auditServer(t)
	for i := 0; i < 3; i++ {
		mustStatus(t, s.Do("POST", "/v2/deployments", deployment(fmt.Sprintf("q-%d", i))), 201)
	}
	mustStatus(t, s.Do("POST", "/api/v1/api-key", map[string]any{}), 200)
	start, end := window()
	base := "start_time=" + url.QueryEscape(start) + "&end_time=" + url.QueryEscape(end)

	bad := []struct {
		query string
		loc   string
		typ   string
	}{
		{"end_time=" + url.QueryEscape(end), "query,start_time", "missing"},
		{"start_time=" + url.QueryEscape(start), "query,end_time", "missing"},
		{"start_time=yesterday&end_time=" + url.QueryEscape(end), "query,start_time", "datetime_parsing"},
		{"start_time=" + url.QueryEscape(end) + "&end_time=" + url.QueryEscape(start), "query,end_time", "value_error"},
		{base + "&limit=0", "query,limit", "greater_than_equal"},
		{base + "&limit=101", "query,limit", "less_than_equal"},
		{base + "&limit=ten", "query,limit", "int_parsing"},
		{base + "&operations=create_deployment&operations=make_coffee", "query,operations,1", "enum"},
		{base + "&cursor=%21%21", "query,cursor", "value_error"},
		{base + "&workspace_id=nope", "query,workspace_id", "uuid_parsing"},
	}
	for _, tc := range bad {
		t.Run(tc.query, func(t *testing.T) {
			r := s.Do("GET", "/api/v1/audit-logs?"+tc.query, nil, "X-Organization-Id", "")
			mustStatus(t, r, 422)
			e := r.Map()["detail"].([]any)[0].(map[string]any)
			var loc []string
			for _, l := range e["loc"].([]any) {
				loc = append(loc, fmt.Sprint(l))
			}
			if strings.Join(loc, ",") != tc.loc || e["type"] != tc.typ {
				t.Fatalf("got %v %v, want %s %s", e["loc"], e["type"], tc.loc, tc.typ)
			}
		})
	}

	// Default limit is 10, items are oldest first, and the cursor pages to the end.
	r := s.Do("GET", "/api/v1/audit-logs?"+base+"&limit=2", nil)
	mustStatus(t, r, 200)
	page := r.Map()
	items := page["items"].([]any)
	if len(items) != 2 || page["cursor"] == nil {
		t.Fatalf("first page: %s", r.Body)
	}
	first := items[0].(map[string]any)
	if first["api"].(map[string]any)["operation"] != "create_deployment" {
		t.Fatalf("oldest first: %v", first["api"])
	}
	seen := 2
	for c := page["cursor"]; c != nil; {
		r = s.Do("GET", "/api/v1/audit-logs?"+base+"&limit=2&cursor="+url.QueryEscape(c.(string)), nil)
		mustStatus(t, r, 200)
		seen += len(r.Map()["items"].([]any))
		c = r.Map()["cursor"]
	}
	if seen != 4 {
		t.Fatalf("paged %d events, want 4", seen)
	}

	// Repeatable operations filter.
	r = s.Do("GET", "/api/v1/audit-logs?"+base+"&operations=create_api_key&operations=create_workspace", nil)
	if n := len(r.Map()["items"].([]any)); n != 1 {
		t.Fatalf("operations filter gave %d", n)
	}
	// Inclusive bounds: a window of exactly the event's millisecond finds it.
	ms := int64(first["time"].(float64))
	at := url.QueryEscape(time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	r = s.Do("GET", "/api/v1/audit-logs?start_time="+at+"&end_time="+at, nil)
	mustStatus(t, r, 200)
	found := false
	for _, it := range r.Map()["items"].([]any) {
		found = found || it.(map[string]any)["metadata"].(map[string]any)["uid"] == first["metadata"].(map[string]any)["uid"]
	}
	if !found {
		t.Fatalf("inclusive bounds missed the event: %s", r.Body)
	}
	// workspace_id filters on the event's workspace.
	ws := first["unmapped"].(map[string]any)["original_audit_log"].(map[string]any)["workspace_id"].(string)
	r = s.Do("GET", "/api/v1/audit-logs?"+base+"&workspace_id="+ws, nil)
	if n := len(r.Map()["items"].([]any)); n != 4 {
		t.Fatalf("workspace filter gave %d", n)
	}
	r = s.Do("GET", "/api/v1/audit-logs?"+base+"&workspace_id=0190f0f0-0000-7000-8000-000000000000", nil)
	if n := len(r.Map()["items"].([]any)); n != 0 {
		t.Fatalf("other workspace gave %d", n)
	}
	r = s.Do("GET", "/api/v1/audit-logs/operations", nil)
	if ops := r.JSON().([]any); len(ops) < 100 {
		t.Fatalf("operations list has %d", len(ops))
	}
}

func TestAuditLogDenials(t *testing.T) {
	s := auditServer(t)
	start, end := window()
	q := "/api/v1/audit-logs?start_time=" + url.QueryEscape(start) + "&end_time=" + url.QueryEscape(end)
	mustStatus(t, s.Do("GET", q, nil, "X-Api-Key", ""), 401)
	wsKey := s.Do("POST", "/api/v1/api-key", map[string]any{}).Map()["key"].(string)
	r := s.Do("GET", q, nil, "X-Api-Key", wsKey)
	mustStatus(t, r, 403)
	if !strings.Contains(detail(t, r), "organization:manage") {
		t.Fatalf("detail: %s", r.Body)
	}
	mustStatus(t, s.Do("GET", q, nil), 200)

	off := apptest.New(t, nil) // flag unset, no env default
	r = off.Do("GET", q, nil)
	mustStatus(t, r, 403)
	if !strings.Contains(detail(t, r), "not enabled") {
		t.Fatalf("detail: %s", r.Body)
	}
}

// TestRefusedOperationsRecordFailure: a tracked operation refused by
// validation or permissions records one Failure event and changes nothing.
func TestRefusedOperationsRecordFailure(t *testing.T) {
	s := auditServer(t)
	ro := s.Do("POST", "/api/v1/api-key", map[string]any{"read_only": true}).Map()["key"].(string)
	mustStatus(t, s.Do("POST", "/v2/deployments", map[string]any{"name": "Not A DNS Label", "source": "internal_docker",
		"source_config": map[string]any{}, "source_revision_config": map[string]any{}, "secrets": []any{}}), 422)
	mustStatus(t, s.Do("POST", "/api/v1/workspaces", map[string]any{"display_name": "x"}, "X-Api-Key", ro), 403)
	start, end := window()
	base := "/api/v1/audit-logs?start_time=" + url.QueryEscape(start) + "&end_time=" + url.QueryEscape(end)
	for op, wantCode := range map[string]float64{"create_deployment": 422, "create_workspace": 403} {
		r := s.Do("GET", base+"&operations="+op, nil)
		items := r.Map()["items"].([]any)
		if len(items) != 1 {
			t.Fatalf("%s: %d events", op, len(items))
		}
		e := items[0].(map[string]any)
		if e["status"] != "Failure" || e["status_id"].(float64) != 2 || e["http_response"].(map[string]any)["code"].(float64) != wantCode {
			t.Fatalf("%s: %v", op, e)
		}
	}
	if got := s.Do("GET", "/v2/deployments", nil).Map()["resources"].([]any); len(got) != 0 {
		t.Fatal("a refused create left a deployment")
	}
}
