package controlplane_test

import (
	"testing"

	"slipway/server/apptest"
	"slipway/server/controlplane"
	"slipway/server/servertest"
)

// TestGraphConfigPathMustStayInTheSource: a graph_config_path (or its alias
// langgraph_config_path) that is absolute or climbs out of the source is a
// 422 at its loc, on create and on PATCH, and nothing is stored.
func TestGraphConfigPathMustStayInTheSource(t *testing.T) {
	s := apptest.New(t, nil)
	create := func(key, path string) *servertest.Response {
		return s.Do("POST", "/v2/deployments", map[string]any{"name": "cfg-path", "source": "internal_source",
			"source_config": map[string]any{}, "source_revision_config": map[string]any{key: path}, "secrets": []any{}})
	}
	bad := []string{"../../../../../master.key", "/etc/passwd", `..\..\master.key`, "agent/../../x.json", "C:/langgraph.json", "."}
	for _, key := range []string{"graph_config_path", "langgraph_config_path"} {
		for _, p := range bad {
			got := controlplane.HTTPErrs(t, create(key, p))
			if len(got) != 1 || got[0] != "body.source_revision_config."+key+"|value_error" {
				t.Fatalf("create with %s %q: %v", key, p, got)
			}
		}
	}
	if l := s.Do("GET", "/v2/deployments", nil).Map()["resources"].([]any); len(l) != 0 {
		t.Fatalf("a refused create was stored: %v", l)
	}

	ok := create("graph_config_path", "./agent/langgraph.json")
	if ok.Status != 201 {
		t.Fatalf("create: %d %s", ok.Status, ok.Body)
	}
	id := ok.Map()["id"].(string)
	before := s.Do("GET", "/v2/deployments/"+id, nil).Map()["latest_revision_id"]
	for _, p := range bad {
		r := s.Do("PATCH", "/v2/deployments/"+id, map[string]any{"source_revision_config": map[string]any{"graph_config_path": p}})
		if got := controlplane.HTTPErrs(t, r); len(got) != 1 || got[0] != "body.source_revision_config.graph_config_path|value_error" {
			t.Fatalf("patch with %q: %v", p, got)
		}
	}
	if after := s.Do("GET", "/v2/deployments/"+id, nil).Map()["latest_revision_id"]; after != before {
		t.Fatalf("a refused PATCH made a revision: %v → %v", before, after)
	}
}
