package oteltrace

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestEnabled(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
		want bool
	}{
		{"nothing set", nil, false},
		{"other OTEL variables only", map[string]string{"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on"}, false},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true},
		{"SDK disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, false},
		{"exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Enabled(func(k string) string { return c.env[k] }); got != c.want {
				t.Fatalf("Enabled = %v, want %v", got, c.want)
			}
		})
	}
}

// TestNilProviderIsOff: every method of a nil Provider works and does
// nothing; Handler returns the handler itself.
func TestNilProviderIsOff(t *testing.T) {
	var p *Provider
	h := http.NotFoundHandler()
	if got := p.Handler(h, nil, Public); got == nil {
		t.Fatal("nil handler")
	}
	ctx, span := p.Start(context.Background(), "x")
	if span.IsRecording() || ctx != context.Background() {
		t.Fatal("a nil provider recorded a span")
	}
	hd := http.Header{"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
	p.Inject(ctx, hd)
	if hd.Get("Traceparent") == "" || p.Remote(hd).IsValid() {
		t.Fatal("a nil provider touched or read the headers")
	}
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestAgentEnv(t *testing.T) {
	got := AgentEnv([]string{"PATH=/bin", "OTEL_EXPORTER_OTLP_ENDPOINT=http://c:4318", "OTEL_SERVICE_NAME=slipway",
		"OTEL_EXPORTER_OTLP_HEADERS=k=v", "OTEL_EMPTY=", "XOTEL_X=1"})
	want := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_HEADERS": "k=v"}
	if !maps.Equal(got, want) {
		t.Fatalf("AgentEnv = %v, want %v", got, want)
	}
}

func TestWithAgentEnv(t *testing.T) {
	pass := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://operator:4318", "OTEL_EXPORTER_OTLP_HEADERS": "a=b"}
	for _, c := range []struct {
		name  string
		env   map[string]string
		taken []string
		want  map[string]string
	}{
		{"no secrets", nil, nil, pass},
		{"other secrets kept", map[string]string{"API_KEY": "s"}, nil,
			map[string]string{"API_KEY": "s", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://operator:4318", "OTEL_EXPORTER_OTLP_HEADERS": "a=b"}},
		{"the deployment's own endpoint wins", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://mine:4318"}, nil,
			map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://mine:4318", "OTEL_EXPORTER_OTLP_HEADERS": "a=b"}},
		{"a secret reference wins", nil, []string{"OTEL_EXPORTER_OTLP_HEADERS"},
			map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://operator:4318"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := WithAgentEnv(c.env, pass, c.taken); !maps.Equal(got, c.want) {
				t.Fatalf("WithAgentEnv = %v, want %v", got, c.want)
			}
		})
	}
	if got := WithAgentEnv(nil, nil, nil); got != nil {
		t.Fatalf("nothing to pass made %v", got)
	}
}

func TestRoutesMatch(t *testing.T) {
	rs := NewRoutes([]Route{{"GET", "/v2/deployments/:id"}, {"POST", "/agents/:name/*path"}, {"GET", "/ok"}})
	for _, c := range []struct{ method, path, want string }{
		{"GET", "/v2/deployments/abc", "/v2/deployments/:id"},
		{"POST", "/agents/x/threads/1/runs", "/agents/:name/*path"},
		{"GET", "/ok", "/ok"},
		{"DELETE", "/ok", ""},
		{"GET", "/nowhere", ""},
	} {
		if got := rs.Match(c.method, c.path); got != c.want {
			t.Errorf("Match(%s %s) = %q, want %q", c.method, c.path, got, c.want)
		}
	}
}

// TestHandlerTrust: a Public server span starts a new trace linked to the
// caller's span; a Continue one is the caller's child. Both are named by
// pattern and carry the status; a 5xx is an error.
func TestHandlerTrust(t *testing.T) {
	const caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	rs := NewRoutes([]Route{{"GET", "/items/:id"}})
	for _, c := range []struct {
		name  string
		trust Trust
	}{{"public", Public}, {"continue", Continue}} {
		t.Run(c.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			p := New(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
			h := p.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !trace.SpanFromContext(r.Context()).IsRecording() {
					t.Error("the handler's context has no span")
				}
				w.WriteHeader(http.StatusBadGateway)
			}), rs, c.trust)
			req := httptest.NewRequest("GET", "/items/42", nil)
			req.Header.Set("traceparent", caller)
			h.ServeHTTP(httptest.NewRecorder(), req)
			spans := rec.Ended()
			if len(spans) != 1 {
				t.Fatalf("%d spans", len(spans))
			}
			s := spans[0]
			if s.Name() != "GET /items/:id" || s.Status().Code.String() != "Error" {
				t.Errorf("span %q status %v", s.Name(), s.Status())
			}
			attrs := map[string]string{}
			for _, kv := range s.Attributes() {
				attrs[string(kv.Key)] = kv.Value.Emit()
			}
			if attrs["http.route"] != "/items/:id" || attrs["http.response.status_code"] != "502" || attrs["url.path"] != "/items/42" {
				t.Errorf("attributes %v", attrs)
			}
			fromCaller := s.SpanContext().TraceID().String() == "0af7651916cd43dd8448eb211c80319c" &&
				s.Parent().SpanID().String() == "b7ad6b7169203331"
			linked := len(s.Links()) == 1 && s.Links()[0].SpanContext.SpanID().String() == "b7ad6b7169203331"
			if c.trust == Public && (fromCaller || !linked || s.Parent().IsValid()) {
				t.Errorf("public: continued %v, linked %v, parent %v", fromCaller, linked, s.Parent())
			}
			if c.trust == Continue && (!fromCaller || linked) {
				t.Errorf("continue: continued %v, linked %v", fromCaller, linked)
			}
		})
	}
}
