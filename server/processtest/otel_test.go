package processtest_test

import (
	"testing"

	"slipway/server/servertest"
)

// TestTracesAcrossProcesses: a `slipway serve` process given
// OTEL_EXPORTER_OTLP_ENDPOINT passes it to the agent it starts on the
// process runtime (through the sandbox), so a run created through the
// proxy is one trace across the two processes: proxy span (serve) → agent
// request span → run span (agent). The deployment's own OTEL_SERVICE_NAME
// secret names its agent's spans.
func TestTracesAcrossProcesses(t *testing.T) {
	rc := servertest.NewOTLPReceiver(t)
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "process", "OTEL_EXPORTER_OTLP_ENDPOINT": rc.URL})
	d := s.Do("POST", "/v2/deployments", map[string]any{"name": "traced", "source": "internal_source", "source_config": map[string]any{},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"},
		"secrets":                []any{map[string]any{"name": "OTEL_SERVICE_NAME", "value": "traced-agent"}}})
	if d.Status != 201 {
		t.Fatalf("create: %d %s", d.Status, d.Body)
	}
	dep := d.Map()["id"].(string)
	rev := deploySource(t, s, dep, map[string]string{"langgraph.json": `{"graphs": {"agent": {"builtin": "echo"}}}`})
	if st := waitStatus(t, s, dep, rev); st != "DEPLOYED" {
		t.Fatalf("revision ended %s:\n%s", st, s.Logs())
	}
	agent := func(method, path string, body any) *servertest.Response {
		return s.Do(method, "/agents/traced"+path, body)
	}
	thread := agent("POST", "/threads", map[string]any{}).Map()["thread_id"].(string)
	run := agent("POST", "/threads/"+thread+"/runs", map[string]any{"assistant_id": "agent",
		"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}})
	if run.Status != 200 {
		t.Fatalf("run: %d %s", run.Status, run.Body)
	}
	runID := run.Map()["run_id"].(string)
	if j := agent("GET", "/threads/"+thread+"/runs/"+runID+"/join", nil); j.Status != 200 {
		t.Fatalf("join: %d %s", j.Status, j.Body)
	}
	// serve stops its agents, each flushing its spans as it exits, then
	// flushes its own.
	s.Stop()

	spans, _ := rc.Spans()
	runSpan := servertest.OneSpan(t, spans, "run", map[string]string{"run_id": runID, "thread_id": thread})
	agentReq := servertest.OneSpan(t, spans, "POST /threads/:thread_id/runs", map[string]string{"url.path": "/threads/" + thread + "/runs"})
	proxy := servertest.OneSpan(t, spans, "proxy POST", map[string]string{"deployment.id": dep, "url.path": "/threads/" + thread + "/runs"})
	if runSpan.Trace != proxy.Trace || runSpan.Parent != agentReq.ID || agentReq.Parent != proxy.ID || agentReq.Trace != proxy.Trace {
		t.Fatalf("not one trace: proxy %s/%s, agent request %s/%s parent %s, run %s parent %s",
			proxy.Trace, proxy.ID, agentReq.Trace, agentReq.ID, agentReq.Parent, runSpan.Trace, runSpan.Parent)
	}
	if proxy.Service != "slipway" || agentReq.Service != "traced-agent" || runSpan.Service != "traced-agent" {
		t.Fatalf("services: proxy %s, agent request %s, run %s", proxy.Service, agentReq.Service, runSpan.Service)
	}
	if runSpan.Attrs["run.status"] != "success" || runSpan.Attrs["graph_id"] != "agent" {
		t.Fatalf("run span attributes: %v", runSpan.Attrs)
	}
}
