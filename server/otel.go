package server

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"slipway/oteltrace"
	"slipway/server/httpx"
)

// OpenTelemetry traces of `serve` (README "Traces"): a server span per
// request to the control plane's router, the reconciler's build and deploy
// spans (controlplane/otel.go), and a client span per request relayed to
// an agent, whose context the agent receives in traceparent. Each App has
// its own provider (a.otel, nil when no OTEL endpoint is set): no global
// tracer, so Apps in one test process never mix their spans.

// traceRequests gives every request rt routes a server span named by its
// route pattern. Requests that reach a deployment by its custom_url or
// the agents origin bypass rt: their proxy span is their first.
func (a *app) traceRequests(rt *httpx.Router) http.Handler {
	if a.otel == nil {
		return rt
	}
	routes := rt.Routes()
	table := make([]oteltrace.Route, len(routes))
	for i, r := range routes {
		table[i] = oteltrace.Route{Method: r.Method, Path: r.Path}
	}
	return a.otel.Handler(rt, oteltrace.NewRoutes(table), oteltrace.Public)
}

// proxySpan starts the client span of a request relayed to deployment t:
// a child of the request's server span, or, where there is none, a new
// trace linked to the caller's traceparent (oteltrace.Public).
func (p *proxy) proxySpan(r *http.Request, t target) (*http.Request, trace.Span) {
	if p.otel == nil {
		return r, nil
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("deployment.id", t.dep), attribute.String("http.request.method", r.Method),
		attribute.String("url.path", t.path))}
	if !trace.SpanContextFromContext(r.Context()).IsValid() {
		if remote := p.otel.Remote(r.Header); remote.IsValid() {
			opts = append(opts, trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: remote}))
		}
	}
	ctx, span := p.otel.Start(r.Context(), "proxy "+r.Method, opts...)
	return r.WithContext(ctx), span
}

// traceResponse records the agent's status on the proxy span, which the
// context of the request sent to the agent holds.
func traceResponse(resp *http.Response) {
	span := trace.SpanFromContext(resp.Request.Context())
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	if resp.StatusCode >= 500 {
		span.SetStatus(codes.Error, http.StatusText(resp.StatusCode))
	}
}

// traceProxyError marks the proxy span of r failed: the agent did not
// answer.
func traceProxyError(r *http.Request, err error) {
	if span := trace.SpanFromContext(r.Context()); span.IsRecording() {
		span.SetStatus(codes.Error, err.Error())
	}
}
