package orgapi_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"slipway/server/audit/ocsftest"
	"slipway/server/servertest"
)

// trackedCase performs one tracked operation successfully and once more in
// a way that is refused; it returns the resource uid the success affects.
type trackedCase struct {
	op        string
	succeed   func() (resource string)
	refuse    func() *servertest.Response
	refusedAs int
}

// TestEveryTrackedOperation performs every tracked operation Slipway
// exposes once successfully and once refused, and checks that each left
// exactly one Success and one Failure event with the right operation,
// actor, credential and resources.
func TestEveryTrackedOperation(t *testing.T) {
	s := auditServer(t)
	// A personal access token of the admin: its id is the credential of
	// every successful operation below.
	pat := s.Do("POST", "/api/v1/api-key/current", map[string]any{"description": "audit test"}).Map()
	patKey, patID := pat["key"].(string), pat["id"].(string)
	ro := s.Do("POST", "/api/v1/api-key", map[string]any{"read_only": true}).Map()
	roKey, roID := ro["key"].(string), ro["id"].(string)
	as := func(key, method, path string, body any) *servertest.Response {
		return s.Do(method, path, body, "X-Api-Key", key)
	}
	ok := func(r *servertest.Response, want int) *servertest.Response {
		t.Helper()
		if r.Status != want {
			t.Fatalf("status %d, want %d: %s", r.Status, want, r.Body)
		}
		return r
	}
	var wsID, depID, keyID, pat2ID string
	cases := []trackedCase{
		{op: "create_api_key", succeed: func() string {
			keyID = ok(as(patKey, "POST", "/api/v1/api-key", map[string]any{}), 200).Map()["id"].(string)
			return keyID
		}, refuse: func() *servertest.Response { return as(roKey, "POST", "/api/v1/api-key", map[string]any{}) }, refusedAs: 403},
		{op: "delete_api_key", succeed: func() string {
			ok(as(patKey, "DELETE", "/api/v1/api-key/"+keyID, nil), 200)
			return keyID
		}, refuse: func() *servertest.Response { return as(roKey, "DELETE", "/api/v1/api-key/"+roID, nil) }, refusedAs: 403},
		{op: "create_personal_access_token", succeed: func() string {
			pat2ID = ok(as(patKey, "POST", "/api/v1/api-key/current", map[string]any{}), 200).Map()["id"].(string)
			return pat2ID
		}, refuse: func() *servertest.Response { return as(roKey, "POST", "/api/v1/api-key/current", map[string]any{}) }, refusedAs: 403},
		{op: "delete_personal_access_token", succeed: func() string {
			ok(as(patKey, "DELETE", "/api/v1/api-key/current/"+pat2ID, nil), 200)
			return pat2ID
		}, refuse: func() *servertest.Response {
			return as(patKey, "DELETE", "/api/v1/api-key/current/0190f0f0-0000-7000-8000-000000000000", nil)
		}, refusedAs: 404},
		{op: "create_workspace", succeed: func() string {
			wsID = ok(as(patKey, "POST", "/api/v1/workspaces", map[string]any{"display_name": "Audited"}), 200).Map()["id"].(string)
			return wsID
		}, refuse: func() *servertest.Response {
			return as(roKey, "POST", "/api/v1/workspaces", map[string]any{"display_name": "x"})
		}, refusedAs: 403},
		{op: "update_workspace", succeed: func() string {
			ok(as(patKey, "PATCH", "/api/v1/workspaces/"+wsID, map[string]any{"display_name": "Audited 2"}), 200)
			return wsID
		}, refuse: func() *servertest.Response {
			return as(patKey, "PATCH", "/api/v1/workspaces/"+wsID, map[string]any{"display_name": ""})
		}, refusedAs: 422},
		{op: "delete_workspace", succeed: func() string {
			ok(as(patKey, "DELETE", "/api/v1/workspaces/"+wsID, nil), 200)
			return wsID
		}, refuse: func() *servertest.Response { return as(roKey, "DELETE", "/api/v1/workspaces/"+wsID, nil) }, refusedAs: 404},
		{op: "create_deployment", succeed: func() string {
			depID = ok(as(patKey, "POST", "/v2/deployments", deployment("audited")), 201).Map()["id"].(string)
			return depID
		}, refuse: func() *servertest.Response { return as(patKey, "POST", "/v2/deployments", deployment("Bad Name")) }, refusedAs: 422},
		{op: "update_deployment", succeed: func() string {
			ok(as(patKey, "PATCH", "/v2/deployments/"+depID, map[string]any{"secrets": []any{map[string]any{"name": "TOKEN", "value": "hunter2-secret"}}}), 200)
			return depID
		}, refuse: func() *servertest.Response {
			return as(patKey, "PATCH", "/v2/deployments/"+depID, map[string]any{"name": "renamed"})
		}, refusedAs: 422},
		{op: "delete_deployment", succeed: func() string {
			ok(as(patKey, "DELETE", "/v2/deployments/"+depID, nil), 204)
			return depID
		}, refuse: func() *servertest.Response {
			return as(patKey, "DELETE", "/v2/deployments/0190f0f0-0000-7000-8000-000000000000", nil)
		}, refusedAs: 404},
	}
	schema, err := ocsftest.Load(ocsftest.SchemaDir())
	if err != nil {
		t.Fatalf("load the OCSF 1.7.0 schema from ../shared: %v", err)
	}
	resources := map[string]string{}
	for _, tc := range cases {
		resources[tc.op] = tc.succeed()
		if r := tc.refuse(); r.Status != tc.refusedAs {
			t.Fatalf("%s refused with %d, want %d: %s", tc.op, r.Status, tc.refusedAs, r.Body)
		}
	}
	start := url.QueryEscape(time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))
	end := url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	var adminUID string
	for _, tc := range cases {
		t.Run(tc.op, func(t *testing.T) {
			r := s.Do("GET", "/api/v1/audit-logs?limit=100&start_time="+start+"&end_time="+end+"&operations="+tc.op, nil)
			if r.Status != 200 {
				t.Fatalf("query: %d %s", r.Status, r.Body)
			}
			var items []any
			for _, it := range r.Map()["items"].([]any) {
				// The setup created the PAT and the read-only key: not part of the case.
				res := fmt.Sprint(it.(map[string]any)["resources"])
				if strings.Contains(res, patID) && tc.op == "create_personal_access_token" || strings.Contains(res, roID) && tc.op == "create_api_key" {
					continue
				}
				items = append(items, it)
			}
			byStatus := map[string]map[string]any{}
			for _, it := range items {
				e := it.(map[string]any)
				byStatus[e["status"].(string)] = e
			}
			if len(items) != 2 || byStatus["Success"] == nil || byStatus["Failure"] == nil {
				var st []string
				for _, it := range items {
					st = append(st, it.(map[string]any)["status"].(string))
				}
				sort.Strings(st)
				t.Fatalf("want one Success and one Failure, got %v", st)
			}
			okEv, bad := byStatus["Success"], byStatus["Failure"]
			for _, e := range []map[string]any{okEv, bad} {
				if e["api"].(map[string]any)["operation"] != tc.op {
					t.Fatalf("operation %v", e["api"])
				}
			}
			user := okEv["actor"].(map[string]any)["user"].(map[string]any)
			if user["credential_uid"] != patID {
				t.Fatalf("success credential %v, want the PAT %s", user["credential_uid"], patID)
			}
			if adminUID == "" {
				adminUID, _ = user["uid"].(string)
			}
			if user["uid"] != adminUID || adminUID == "" {
				t.Fatalf("actor %v, want the admin %s", user["uid"], adminUID)
			}
			var uids []string
			for _, res := range okEv["resources"].([]any) {
				uids = append(uids, res.(map[string]any)["uid"].(string))
			}
			if !contains(uids, resources[tc.op]) {
				t.Fatalf("resources %v lack %s", uids, resources[tc.op])
			}
			if code := bad["http_response"].(map[string]any)["code"].(float64); int(code) != tc.refusedAs {
				t.Fatalf("failure recorded code %v, want %d", code, tc.refusedAs)
			}
			for _, it := range items {
				raw, _ := json.Marshal(it)
				if v := schema.ValidateJSON(raw); len(v) > 0 {
					t.Fatalf("event is not valid OCSF 1.7.0 API Activity: %v", v)
				}
			}
			raw := fmt.Sprint(items)
			for _, secret := range []string{"hunter2-secret", patKeyOf(pat), roKey} {
				if strings.Contains(raw, secret) {
					t.Fatalf("an event contains a secret or key")
				}
			}
		})
	}
}

func patKeyOf(m map[string]any) string { return m["key"].(string) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
