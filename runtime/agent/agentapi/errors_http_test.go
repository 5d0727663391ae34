package agentapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"slipway/server/servertest"
)

// TestAgentErrorShapes: a query parameter the agent API reads with the
// shared httpx parsers answers a 422 whose detail lists field errors at
// ["query", name], as the other APIs do; the agent API's own checks of a
// body or a path answer {"detail": "<sentence>"}, as the reference agent
// servers do.
func TestAgentErrorShapes(t *testing.T) {
	a := servertest.StartAgent(t, nil)
	th := newThread(t, a)
	cases := []struct {
		name, method, path string
		body               any
		loc                []any  // a field error at loc (nil: a sentence)
		typ                string // its type
		sentence           string // or the sentence
	}{
		{"runs limit too small", "GET", "/threads/" + th + "/runs?limit=0", nil, []any{"query", "limit"}, "greater_than_equal", ""},
		{"runs limit too large", "GET", "/threads/" + th + "/runs?limit=1001", nil, []any{"query", "limit"}, "less_than_equal", ""},
		{"runs offset not a number", "GET", "/threads/" + th + "/runs?offset=x", nil, []any{"query", "offset"}, "int_parsing", ""},
		{"history limit", "GET", "/threads/" + th + "/history?limit=abc", nil, []any{"query", "limit"}, "int_parsing", ""},
		{"subgraphs flag", "GET", "/threads/" + th + "/state?subgraphs=maybe", nil, []any{"query", "subgraphs"}, "bool_parsing", ""},
		{"recurse flag", "GET", "/assistants/echo/subgraphs?recurse=maybe", nil, []any{"query", "recurse"}, "bool_parsing", ""},
		{"body limit", "POST", "/threads/search", map[string]any{"limit": 1001}, nil, "", "limit must be between 1 and 1000"},
		{"body offset", "POST", "/store/items/search", map[string]any{"offset": -1}, nil, "", "offset must not be negative"},
		{"history body limit", "POST", "/threads/" + th + "/history", map[string]any{"limit": -1}, nil, "", "limit must be between 1 and 1000"},
		{"thread id", "GET", "/threads/xyz", nil, nil, "", `thread_id "xyz" is not a UUID`},
		{"missing assistant", "POST", "/runs/wait", map[string]any{}, nil, "", "assistant_id is required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := a.Do(tc.method, tc.path, tc.body)
			if r.Status != 422 {
				t.Fatalf("status %d, want 422: %s", r.Status, r.Body)
			}
			if tc.loc == nil {
				if d := r.Map()["detail"]; d != tc.sentence {
					t.Fatalf("detail %v, want %q", d, tc.sentence)
				}
				return
			}
			var body struct {
				Detail []struct {
					Loc  []any  `json:"loc"`
					Msg  string `json:"msg"`
					Type string `json:"type"`
				} `json:"detail"`
			}
			if err := json.Unmarshal(r.Body, &body); err != nil || len(body.Detail) != 1 {
				t.Fatalf("not one field error: %s", r.Body)
			}
			e := body.Detail[0]
			if len(e.Loc) != 2 || e.Loc[0] != tc.loc[0] || e.Loc[1] != tc.loc[1] || e.Type != tc.typ || e.Msg == "" {
				t.Fatalf("field error %+v, want %s at %v", e, tc.typ, tc.loc)
			}
		})
	}
}

// TestNotFoundDetails: a 404 says what was not found in the reference
// servers' words ("Thread <id> not found"), which clients match on, in
// Slipway's {"detail": ...} shape.
func TestNotFoundDetails(t *testing.T) {
	a := servertest.StartAgent(t, nil)
	th := newThread(t, a)
	const missing = "00000000-0000-4000-8000-000000000001"
	for _, tc := range []struct {
		name, method, path string
		body               any
		want               string
	}{
		{"thread", "GET", "/threads/" + missing, nil, "Thread " + missing + " not found"},
		{"thread state", "GET", "/threads/" + missing + "/state", nil, "Thread " + missing + " not found"},
		{"assistant", "GET", "/assistants/" + missing, nil, "Assistant " + missing + " not found"},
		{"run's assistant", "POST", "/runs/wait", map[string]any{"assistant_id": missing}, "Assistant " + missing + " not found"},
		{"run", "GET", "/threads/" + th + "/runs/" + missing, nil, "Run " + missing + " not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := a.Do(tc.method, tc.path, tc.body)
			if r.Status != 404 || r.Map()["detail"] != tc.want {
				t.Fatalf("%d %s, want 404 with detail %q", r.Status, r.Body, tc.want)
			}
		})
	}
}

// TestUpdateStateNeedsAGraph: as the reference, a thread that never ran has
// no graph to apply a state update with (400, in the reference's words);
// a run gives an existing thread its graph and assistant in its metadata,
// and the update then applies.
func TestUpdateStateNeedsAGraph(t *testing.T) {
	a := servertest.StartAgent(t, nil)
	th := newThread(t, a)
	r := a.Do("POST", "/threads/"+th+"/state", map[string]any{"values": map[string]any{"x": 1}})
	if d, _ := r.Map()["detail"].(string); r.Status != 400 || !strings.Contains(d, "has no assigned graph ID") {
		t.Fatalf("update of a thread that never ran: %d %s", r.Status, r.Body)
	}
	if r := a.Do("POST", "/threads/"+th+"/runs/wait", map[string]any{"assistant_id": "echo",
		"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}}); r.Status != 200 {
		t.Fatalf("run: %d %s", r.Status, r.Body)
	}
	meta, _ := a.Do("GET", "/threads/"+th, nil).Map()["metadata"].(map[string]any)
	if meta["graph_id"] != "echo" || meta["assistant_id"] == nil {
		t.Fatalf("thread metadata after a run: %v", meta)
	}
	if r := a.Do("POST", "/threads/"+th+"/state", map[string]any{"values": map[string]any{"x": 1}}); r.Status != 200 {
		t.Fatalf("update after a run: %d %s", r.Status, r.Body)
	}
}
