package oteltrace

import (
	"net/http"
	"slipway/server/httpx"

	"github.com/julienschmidt/httprouter"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Route is one registered (method, path pattern) pair of a router.
type Route struct{ Method, Path string }

// Routes finds the pattern a request matched, so that a span is named
// "GET /v2/deployments/:deployment_id" and not by the raw path (whose ids
// would make every span name unique). It mirrors the router's table: an
// httprouter with the same registrations, whose handles only say their
// pattern.
type Routes struct{ rt *httprouter.Router }

// NewRoutes builds the matcher for routes (as httpx.Router.Routes lists
// them; a table that httprouter accepted once is accepted again).
func NewRoutes(routes []Route) *Routes {
	rt := httprouter.New()
	for _, r := range routes {
		pattern := r.Path
		rt.Handle(r.Method, r.Path, func(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
			w.(*patternSink).pattern = pattern
		})
	}
	return &Routes{rt: rt}
}

// Match returns the pattern of the route method and path reach, or "".
func (rs *Routes) Match(method, path string) string {
	if rs == nil {
		return ""
	}
	h, _, _ := rs.rt.Lookup(method, path)
	if h == nil {
		return ""
	}
	var sink patternSink
	h(&sink, nil, nil)
	return sink.pattern
}

// patternSink receives a matched route's pattern; it is never written to.
type patternSink struct {
	http.ResponseWriter
	pattern string
}

// Trust says what a server span does with a request's traceparent.
type Trust int

const (
	// Public: anyone may send the request. Its span starts a new trace,
	// linked to the caller's span: a client cannot graft Slipway's spans
	// onto a trace of its choosing nor force them sampled, and a tracing
	// backend still joins the two through the link.
	Public Trust = iota
	// Continue: the caller is Slipway itself (an agent behind its token):
	// the span continues the caller's trace as its child.
	Continue
)

// Handler wraps h with a server span per request, named "METHOD pattern"
// (routes' pattern, or the method alone when none matched) with the
// http.request.method, http.route, url.path and
// http.response.status_code attributes; a 5xx answer is an error. With
// tracing off it returns h itself.
func (p *Provider) Handler(h http.Handler, routes *Routes, trust Trust) http.Handler {
	if p == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route := routes.Match(r.Method, r.URL.Path)
		name := r.Method
		attrs := []attribute.KeyValue{attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)}
		if route != "" {
			name += " " + route
			attrs = append(attrs, attribute.String("http.route", route))
		}
		opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...)}
		ctx := r.Context()
		if remote := p.Remote(r.Header); remote.IsValid() {
			if trust == Continue {
				ctx = trace.ContextWithRemoteSpanContext(ctx, remote)
			} else {
				opts = append(opts, trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: remote}))
			}
		}
		ctx, span := p.tracer.Start(ctx, name, opts...)
		sw := &httpx.StatusRecorder{ResponseWriter: w}
		defer func() {
			status := sw.Code() // nothing written: net/http answers 200
			span.SetAttributes(attribute.Int("http.response.status_code", status))
			if status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(status))
			}
			span.End()
		}()
		h.ServeHTTP(sw, r.WithContext(ctx))
	})
}
