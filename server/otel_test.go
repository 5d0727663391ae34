package server

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"slipway/config"
	"slipway/oteltrace"
	"slipway/runtime/agent"
	"slipway/runtime/agent/agentapi"
	"slipway/server/servertest"
	"slipway/storage"
)

// startTracedAgent serves the agent API in this process, as `slipway
// agent` wires it (engine, API, a tracer provider from the environment),
// with the built-in echo graph. Its stop closes the server (waiting for
// requests in flight, so that their spans have ended), then flushes the
// provider.
func startTracedAgent(t testing.TB) (url string, stop func()) {
	t.Helper()
	otel, err := oteltrace.FromEnv(context.Background(), "slipway-agent")
	if err != nil {
		t.Fatal(err)
	}
	db, err := storage.Open(filepath.Join(t.TempDir(), "agent.db"), time.Second, agent.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	eng := &agent.Engine{DB: db, Graphs: map[string]agent.Graph{"echo": agent.Echo{}}, Workers: 4, Timeout: time.Minute,
		Log: zerolog.Nop(), Tracing: otel}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&agentapi.API{Engine: eng, MaxBody: 1 << 20, Tracing: otel}).Handler())
	var once sync.Once
	stop = func() {
		once.Do(func() {
			srv.Close()
			cancel()
			eng.Wait()
			if err := otel.Shutdown(context.Background()); err != nil {
				t.Errorf("flush the agent's spans: %v", err)
			}
			db.Close()
		})
	}
	t.Cleanup(stop)
	return srv.URL, stop
}

// TestTracesSpanProxyAgentAndRun (acceptance 3 of the traces work): with
// OTEL_EXPORTER_OTLP_ENDPOINT naming an OTLP receiver, a run created
// through the proxy is one trace: the control plane's request span → its
// proxy span (deployment.ID) → the agent's request span → the run's span
// (run_id, thread_id, assistant_id, graph_id, outcome), each the parent of
// the next. The caller's own traceparent is linked, not continued; the
// deploy has its build and deploy spans; spans are named by route pattern.
func TestTracesSpanProxyAgentAndRun(t *testing.T) {
	rc := servertest.NewOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rc.URL)
	agentURL, stopAgent := startTracedAgent(t)
	s := startApp(t, nil)
	dep := servertest.EchoDeployment(t, s, "traced", agentURL, nil)

	th := s.Do("POST", "/agents/traced/threads", map[string]any{})
	if th.Status != 200 {
		t.Fatalf("create thread: %d %s", th.Status, th.Body)
	}
	thread := th.Map()["thread_id"].(string)
	// A client that traces itself: Slipway links its span, in a trace of
	// Slipway's own.
	const clientTrace, clientSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	run := s.Do("POST", "/agents/traced/threads/"+thread+"/runs",
		map[string]any{"assistant_id": "echo", "input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}},
		"traceparent", "00-"+clientTrace+"-"+clientSpan+"-01")
	if run.Status != 200 {
		t.Fatalf("create run: %d %s", run.Status, run.Body)
	}
	runID := run.Map()["run_id"].(string)
	if j := s.Do("GET", "/agents/traced/threads/"+thread+"/runs/"+runID+"/join", nil); j.Status != 200 {
		t.Fatalf("join run: %d %s", j.Status, j.Body)
	}
	if st := s.Do("GET", "/agents/traced/threads/"+thread+"/runs/"+runID, nil).Map()["status"]; st != "success" {
		t.Fatalf("run status %v, want success", st)
	}
	// Stopping flushes: the agent's spans, then the control plane's.
	stopAgent()
	s.Stop()

	spans, _ := rc.Spans()
	runSpan := servertest.OneSpan(t, spans, "run", map[string]string{"run_id": runID})
	agentReq := servertest.OneSpan(t, spans, "POST /threads/:thread_id/runs", map[string]string{"url.path": "/threads/" + thread + "/runs"})
	proxy := servertest.OneSpan(t, spans, "proxy POST", map[string]string{"deployment.id": dep, "url.path": "/threads/" + thread + "/runs"})
	cpReq := servertest.OneSpan(t, spans, "POST /agents/:name/*path", map[string]string{"url.path": "/agents/traced/threads/" + thread + "/runs"})

	chain := []struct {
		span            servertest.OTLPSpan
		service, parent string
		kind            tracepb.Span_SpanKind
	}{
		{cpReq, "slipway", "", tracepb.Span_SPAN_KIND_SERVER},
		{proxy, "slipway", cpReq.ID, tracepb.Span_SPAN_KIND_CLIENT},
		{agentReq, "slipway-agent", proxy.ID, tracepb.Span_SPAN_KIND_SERVER},
		{runSpan, "slipway-agent", agentReq.ID, tracepb.Span_SPAN_KIND_INTERNAL},
	}
	for _, c := range chain {
		if c.span.Trace != cpReq.Trace || c.span.Parent != c.parent || c.span.Service != c.service || c.span.Kind != c.kind {
			t.Errorf("span %s: trace %s parent %q service %s kind %v; want trace %s parent %q service %s kind %v",
				c.span.Name, c.span.Trace, c.span.Parent, c.span.Service, c.span.Kind, cpReq.Trace, c.parent, c.service, c.kind)
		}
	}
	if cpReq.Trace == clientTrace || len(cpReq.Links) != 1 || cpReq.Links[0] != clientSpan || cpReq.LinkTraces[0] != clientTrace {
		t.Errorf("the client's traceparent must be linked, not continued: trace %s links %v %v", cpReq.Trace, cpReq.Links, cpReq.LinkTraces)
	}
	for k, want := range map[string]string{"thread_id": thread, "assistant_id": run.Map()["assistant_id"].(string), "graph_id": "echo", "run.status": "success"} {
		if runSpan.Attrs[k] != want {
			t.Errorf("run span %s = %q, want %q (%v)", k, runSpan.Attrs[k], want, runSpan.Attrs)
		}
	}
	if runSpan.Started == 0 || runSpan.Started < runSpan.Start {
		t.Errorf("run span: no run.started event after its start (events %v)", runSpan.Events)
	}
	for _, sp := range []servertest.OTLPSpan{cpReq, agentReq} {
		if sp.Attrs["http.response.status_code"] != "200" || sp.Attrs["http.request.method"] != "POST" || sp.Attrs["http.route"] == "" {
			t.Errorf("request span %s attributes: %v", sp.Name, sp.Attrs)
		}
	}
	if proxy.Attrs["http.response.status_code"] != "200" {
		t.Errorf("proxy span attributes: %v", proxy.Attrs)
	}

	// The deploy: a rollout with its build and deploy, the ids on each.
	ids := map[string]string{"deployment.id": dep}
	rollout := servertest.OneSpan(t, spans, "revision.rollout", ids)
	for _, name := range []string{"revision.build", "revision.deploy"} {
		if sp := servertest.OneSpan(t, spans, name, ids); sp.Parent != rollout.ID || sp.Attrs["revision.id"] != rollout.Attrs["revision.id"] || sp.Attrs["revision.id"] == "" {
			t.Errorf("%s: parent %s revision %q, want rollout %s revision %q", name, sp.Parent, sp.Attrs["revision.id"], rollout.ID, rollout.Attrs["revision.id"])
		}
	}
	// A control-plane read is named by its pattern, never its raw path.
	if len(servertest.FindSpans(spans, "GET /v2/deployments/:id/revisions/:rid", nil)) == 0 {
		t.Errorf("no span named by the revision route's pattern")
	}
	for _, sp := range spans {
		if sp.Name == "GET /v2/deployments/"+dep+"/revisions/"+rollout.Attrs["revision.id"] {
			t.Errorf("a span is named by its raw path: %s", sp.Name)
		}
	}
}

// TestTracesOffWithoutEndpoint: with no OTEL endpoint set (other OTEL_*
// variables notwithstanding), neither the control plane nor the agent
// builds a tracer provider, so no exporter exists to send anything; the
// servers work as before.
func TestTracesOffWithoutEndpoint(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_SERVICE_NAME", "not-exported")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	var app *App
	s := servertest.StartWith(t, nil, servertest.ServeFactory(func(cfg config.Serve, log zerolog.Logger) (servertest.App, error) {
		x, err := New(context.Background(), cfg, log, "dev")
		app = x
		return x, err
	}))
	if app.a.otel != nil || app.a.cp.Tracing != nil {
		t.Fatal("a tracer provider was built with no OTEL endpoint set")
	}
	agentURL, stopAgent := startTracedAgent(t)
	servertest.EchoDeployment(t, s, "untraced", agentURL, nil)
	if r := s.Do("POST", "/agents/untraced/runs/wait", map[string]any{"assistant_id": "echo", "input": map[string]any{}}); r.Status != 200 {
		t.Fatalf("run: %d %s", r.Status, r.Body)
	}
	stopAgent()
	s.Stop()
	if p, err := oteltrace.FromEnv(context.Background(), "slipway-agent"); p != nil || err != nil {
		t.Fatalf("the agent's provider: %v %v, want none", p, err)
	}
}
