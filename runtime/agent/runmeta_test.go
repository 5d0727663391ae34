package agent

import (
	"maps"
	"testing"
)

// TestRunMetadataAsTheReference: a run's metadata is its assistant's, then
// its thread's (with the graph and assistant an idle thread takes), then
// the run config's and its own, the assistant id always the real one, as
// both reference servers record it.
func TestRunMetadataAsTheReference(t *testing.T) {
	e, _ := cronEngine(t)
	a, err := e.CreateAssistant(Assistant{GraphID: "echo", Metadata: map[string]any{"team": "core", "tier": "gold"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	th, err := e.CreateThread("", map[string]any{"owner": "ann", "tier": "silver"}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		rc   RunCreate
		want map[string]any
	}{
		{"assistant and thread", RunCreate{AssistantID: a.AssistantID},
			map[string]any{"team": "core", "tier": "silver", "owner": "ann", "graph_id": "echo", "assistant_id": a.AssistantID}},
		{"the run's own wins", RunCreate{AssistantID: a.AssistantID, Metadata: map[string]any{"tier": "run", "origin": "test"}},
			map[string]any{"team": "core", "tier": "run", "owner": "ann", "origin": "test", "graph_id": "echo", "assistant_id": a.AssistantID}},
		{"config metadata, and no spoofed assistant", RunCreate{AssistantID: a.AssistantID,
			Config:   map[string]any{"metadata": map[string]any{"via": "config", "tier": "config"}},
			Metadata: map[string]any{"assistant_id": "someone-else"}},
			map[string]any{"team": "core", "tier": "config", "owner": "ann", "via": "config", "graph_id": "echo", "assistant_id": a.AssistantID}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _, err := e.CreateRun(th.ThreadID, tc.rc)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(r.Metadata, tc.want) {
				t.Fatalf("metadata = %v, want %v", r.Metadata, tc.want)
			}
			got, err := e.GetRun(th.ThreadID, r.RunID)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got.Metadata, tc.want) {
				t.Fatalf("stored metadata = %v, want %v", got.Metadata, tc.want)
			}
			if _, err := e.Join(t.Context(), th.ThreadID, r.RunID); err != nil {
				t.Fatal(err)
			}
		})
	}
}
