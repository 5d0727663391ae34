package server

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"slipway/config"
	"slipway/oteltrace"
	"slipway/runtime/agent"
	"slipway/runtime/agent/agentapi"
	"slipway/server/servertest"
	"slipway/storage"
)

// otlpSpan is one span an OTLP receiver got, flattened.
type otlpSpan struct {
	service, name          string
	trace, id, parent      string
	kind                   tracepb.Span_SpanKind
	attrs                  map[string]string
	links                  []string // linked span ids
	linkTraces             []string // and their trace ids
	events                 []string
	status                 tracepb.Status_StatusCode
	startNanos, startEvent uint64
}

// otlpReceiver is an OTLP/HTTP traces endpoint (POST /v1/traces with a
// protobuf ExportTraceServiceRequest), as a collector serves it.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []otlpSpan
	posts int
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	rc := &otlpReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.Error(w, "not an OTLP traces request", http.StatusNotFound)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		raw, err := io.ReadAll(body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(raw, &req)
		}
		if err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("OTLP receiver: undecodable export (%s): %v", r.Header.Get("Content-Type"), err)
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		rc.add(&req)
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *otlpReceiver) add(req *coltracepb.ExportTraceServiceRequest) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.posts++
	for _, rs := range req.ResourceSpans {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				sp := otlpSpan{service: service, name: s.Name, trace: hex.EncodeToString(s.TraceId),
					id: hex.EncodeToString(s.SpanId), parent: hex.EncodeToString(s.ParentSpanId), kind: s.Kind,
					attrs: map[string]string{}, status: s.GetStatus().GetCode(), startNanos: s.StartTimeUnixNano}
				for _, kv := range s.Attributes {
					switch v := kv.GetValue().Value.(type) {
					case *commonpb.AnyValue_StringValue:
						sp.attrs[kv.Key] = v.StringValue
					case *commonpb.AnyValue_IntValue:
						sp.attrs[kv.Key] = strconv.FormatInt(v.IntValue, 10)
					default:
						sp.attrs[kv.Key] = kv.GetValue().String()
					}
				}
				for _, l := range s.Links {
					sp.links = append(sp.links, hex.EncodeToString(l.SpanId))
					sp.linkTraces = append(sp.linkTraces, hex.EncodeToString(l.TraceId))
				}
				for _, e := range s.Events {
					sp.events = append(sp.events, e.Name)
					if e.Name == "run.started" {
						sp.startEvent = e.TimeUnixNano
					}
				}
				rc.spans = append(rc.spans, sp)
			}
		}
	}
}

func (rc *otlpReceiver) got() ([]otlpSpan, int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]otlpSpan(nil), rc.spans...), rc.posts
}

// find returns the spans named name whose attributes include want.
func find(spans []otlpSpan, name string, want map[string]string) []otlpSpan {
	var out []otlpSpan
next:
	for _, s := range spans {
		if s.name != name {
			continue
		}
		for k, v := range want {
			if s.attrs[k] != v {
				continue next
			}
		}
		out = append(out, s)
	}
	return out
}

// one is find that expects exactly one span.
func one(t *testing.T, spans []otlpSpan, name string, want map[string]string) otlpSpan {
	t.Helper()
	got := find(spans, name, want)
	if len(got) != 1 {
		var names []string
		for _, s := range spans {
			names = append(names, s.service+":"+s.name)
		}
		t.Fatalf("want one span %q with %v, got %d; all spans: %v", name, want, len(got), names)
	}
	return got[0]
}

// startTracedAgent serves the agent API in this process, as `slipway
// agent` wires it (engine, API, a tracer provider from the environment),
// with the built-in echo graph. Its stop closes the server (waiting for
// requests in flight, so that their spans have ended), then flushes the
// provider.
func startTracedAgent(t *testing.T) (url string, stop func()) {
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
// proxy span (deployment.id) → the agent's request span → the run's span
// (run_id, thread_id, assistant_id, graph_id, outcome), each the parent of
// the next. The caller's own traceparent is linked, not continued; the
// deploy has its build and deploy spans; spans are named by route pattern.
func TestTracesSpanProxyAgentAndRun(t *testing.T) {
	rc := newOTLPReceiver(t)
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

	spans, _ := rc.got()
	runSpan := one(t, spans, "run", map[string]string{"run_id": runID})
	agentReq := one(t, spans, "POST /threads/:thread_id/runs", map[string]string{"url.path": "/threads/" + thread + "/runs"})
	proxy := one(t, spans, "proxy POST", map[string]string{"deployment.id": dep, "url.path": "/threads/" + thread + "/runs"})
	cpReq := one(t, spans, "POST /agents/:name/*path", map[string]string{"url.path": "/agents/traced/threads/" + thread + "/runs"})

	chain := []struct {
		span            otlpSpan
		service, parent string
		kind            tracepb.Span_SpanKind
	}{
		{cpReq, "slipway", "", tracepb.Span_SPAN_KIND_SERVER},
		{proxy, "slipway", cpReq.id, tracepb.Span_SPAN_KIND_CLIENT},
		{agentReq, "slipway-agent", proxy.id, tracepb.Span_SPAN_KIND_SERVER},
		{runSpan, "slipway-agent", agentReq.id, tracepb.Span_SPAN_KIND_INTERNAL},
	}
	for _, c := range chain {
		if c.span.trace != cpReq.trace || c.span.parent != c.parent || c.span.service != c.service || c.span.kind != c.kind {
			t.Errorf("span %s: trace %s parent %q service %s kind %v; want trace %s parent %q service %s kind %v",
				c.span.name, c.span.trace, c.span.parent, c.span.service, c.span.kind, cpReq.trace, c.parent, c.service, c.kind)
		}
	}
	if cpReq.trace == clientTrace || len(cpReq.links) != 1 || cpReq.links[0] != clientSpan || cpReq.linkTraces[0] != clientTrace {
		t.Errorf("the client's traceparent must be linked, not continued: trace %s links %v %v", cpReq.trace, cpReq.links, cpReq.linkTraces)
	}
	for k, want := range map[string]string{"thread_id": thread, "assistant_id": run.Map()["assistant_id"].(string), "graph_id": "echo", "run.status": "success"} {
		if runSpan.attrs[k] != want {
			t.Errorf("run span %s = %q, want %q (%v)", k, runSpan.attrs[k], want, runSpan.attrs)
		}
	}
	if runSpan.startEvent == 0 || runSpan.startEvent < runSpan.startNanos {
		t.Errorf("run span: no run.started event after its start (events %v)", runSpan.events)
	}
	for _, sp := range []otlpSpan{cpReq, agentReq} {
		if sp.attrs["http.response.status_code"] != "200" || sp.attrs["http.request.method"] != "POST" || sp.attrs["http.route"] == "" {
			t.Errorf("request span %s attributes: %v", sp.name, sp.attrs)
		}
	}
	if proxy.attrs["http.response.status_code"] != "200" {
		t.Errorf("proxy span attributes: %v", proxy.attrs)
	}

	// The deploy: a rollout with its build and deploy, the ids on each.
	ids := map[string]string{"deployment.id": dep}
	rollout := one(t, spans, "revision.rollout", ids)
	for _, name := range []string{"revision.build", "revision.deploy"} {
		if sp := one(t, spans, name, ids); sp.parent != rollout.id || sp.attrs["revision.id"] != rollout.attrs["revision.id"] || sp.attrs["revision.id"] == "" {
			t.Errorf("%s: parent %s revision %q, want rollout %s revision %q", name, sp.parent, sp.attrs["revision.id"], rollout.id, rollout.attrs["revision.id"])
		}
	}
	// A control-plane read is named by its pattern, never its raw path.
	if len(find(spans, "GET /v2/deployments/:id/revisions/:rid", nil)) == 0 {
		t.Errorf("no span named by the revision route's pattern")
	}
	for _, sp := range spans {
		if sp.name == "GET /v2/deployments/"+dep+"/revisions/"+rollout.attrs["revision.id"] {
			t.Errorf("a span is named by its raw path: %s", sp.name)
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
