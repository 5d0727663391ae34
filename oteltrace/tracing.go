// Package oteltrace is Slipway's OpenTelemetry tracing: a tracer provider
// that exports spans over OTLP/HTTP when the standard OTEL_* variables ask
// for it, HTTP server spans named by route pattern, and W3C trace-context
// propagation.
//
// There is no global state: `slipway serve` and `slipway agent` each build
// one Provider (FromEnv) and hand it to what they wire, so several control
// planes or agents in one test process never share spans. A nil *Provider
// is tracing off; every method is safe on it and costs a nil check.
package oteltrace

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// scope is the instrumentation scope every Slipway span is reported under.
const scope = "slipway"

// Provider is one process's (or one in-process App's) tracing: its SDK
// tracer provider and exporter. nil means off.
type Provider struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// Enabled reports whether getenv configures an OTLP traces endpoint:
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT set,
// and neither OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") ||
		strings.EqualFold(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")), "none") {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

// FromEnv builds the Provider the process environment configures, or nil
// (tracing off: no exporter, no tracer) when no OTLP endpoint is set. The
// SDK reads the standard variables itself: the endpoint and headers
// (OTEL_EXPORTER_OTLP_*), the sampler (OTEL_TRACES_SAMPLER[_ARG]), the
// batch processor (OTEL_BSP_*) and the resource (OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES); service is the service.name used when
// OTEL_SERVICE_NAME is not set.
func FromEnv(ctx context.Context, service string) (*Provider, error) {
	if !Enabled(os.Getenv) {
		return nil, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	// Later options win: the environment's service name over the default.
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("trace resource (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME): %w", err)
	}
	return newProvider(sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))), nil
}

// New wraps an SDK tracer provider built elsewhere (tests with an
// in-memory exporter); nil tp is tracing off.
func New(tp *sdktrace.TracerProvider) *Provider {
	if tp == nil {
		return nil
	}
	return newProvider(tp)
}

func newProvider(tp *sdktrace.TracerProvider) *Provider {
	return &Provider{tp: tp, tracer: tp.Tracer(scope), prop: propagation.TraceContext{}}
}

// Shutdown exports what is still buffered and stops the exporter.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	if err := p.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("flush traces: %w", err)
	}
	return nil
}

// ForceFlush exports what is buffered now.
func (p *Provider) ForceFlush(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.tp.ForceFlush(ctx)
}

// Start starts a span as the child of ctx's span; with tracing off it
// returns ctx and a no-op span.
func (p *Provider) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if p == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	return p.tracer.Start(ctx, name, opts...)
}

// Inject writes ctx's span context into h as W3C traceparent (and
// tracestate), replacing whatever the caller sent in them.
func (p *Provider) Inject(ctx context.Context, h http.Header) {
	if p == nil {
		return
	}
	h.Del("Traceparent")
	h.Del("Tracestate")
	p.prop.Inject(ctx, propagation.HeaderCarrier(h))
}

// Remote is the span context a request's traceparent names (invalid when
// it has none or a malformed one).
func (p *Provider) Remote(h http.Header) trace.SpanContext {
	if p == nil {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(p.prop.Extract(context.Background(), propagation.HeaderCarrier(h)))
}

// End ends span with err's outcome: an error status when err is not nil.
func End(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
