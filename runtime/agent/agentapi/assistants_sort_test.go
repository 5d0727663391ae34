package agentapi_test

import (
	"encoding/json"
	"slices"
	"testing"

	"slipway/server/servertest"
)

// TestAssistantSearchOrder: /assistants/search orders by sort_by and
// sort_order as the reference does (names case-insensitively), newest
// first by default, and refuses an order it does not know.
func TestAssistantSearchOrder(t *testing.T) {
	a := servertest.StartAgent(t, nil)
	for _, name := range []string{"bravo", "Alpha", "charlie"} {
		if r := a.Do("POST", "/assistants", map[string]any{"graph_id": "echo", "name": name, "metadata": map[string]any{"set": "sort"}}); r.Status != 200 {
			t.Fatalf("create %s: %d %s", name, r.Status, r.Body)
		}
	}
	names := func(body map[string]any) []string {
		r := a.Do("POST", "/assistants/search", body)
		if r.Status != 200 {
			t.Fatalf("search %v: %d %s", body, r.Status, r.Body)
		}
		var list []struct{ Name string }
		if err := json.Unmarshal(r.Body, &list); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, x := range list {
			out = append(out, x.Name)
		}
		return out
	}
	meta := map[string]any{"set": "sort"}
	for _, tc := range []struct {
		sortBy, order string
		want          []string
	}{
		{"", "", []string{"charlie", "Alpha", "bravo"}},
		{"name", "asc", []string{"Alpha", "bravo", "charlie"}},
		{"name", "desc", []string{"charlie", "bravo", "Alpha"}},
		{"created_at", "asc", []string{"bravo", "Alpha", "charlie"}},
		{"updated_at", "desc", []string{"charlie", "Alpha", "bravo"}},
	} {
		body := map[string]any{"metadata": meta}
		if tc.sortBy != "" {
			body["sort_by"], body["sort_order"] = tc.sortBy, tc.order
		}
		if got := names(body); !slices.Equal(got, tc.want) {
			t.Errorf("sort_by %q %q: %v, want %v", tc.sortBy, tc.order, got, tc.want)
		}
	}
	if r := a.Do("POST", "/assistants/search", map[string]any{"sort_by": "colour"}); r.Status != 422 {
		t.Fatalf("unknown sort_by: %d %s", r.Status, r.Body)
	}
}
