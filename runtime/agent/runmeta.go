package agent

// runMetadata is a new run's metadata as both reference servers record
// it: the assistant's metadata, then the thread's (which names the graph
// and the assistant once an idle thread takes the run), then the run
// config's and the run's own, and always the assistant that runs it. A
// client reading or filtering runs by metadata sees what a checkpoint of
// the run records.
func runMetadata(a Assistant, thread map[string]any, rc RunCreate) map[string]any {
	out := merge(a.Metadata, thread)
	if m, ok := rc.Config["metadata"].(map[string]any); ok {
		out = merge(out, m)
	}
	out = merge(out, rc.Metadata)
	out["assistant_id"] = a.AssistantID
	return out
}
