package agent

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// A run's span (README "Traces"): it starts when the run is created, as a
// child of the span of the request that created it (the agent API's
// server span, itself the child of Slipway's proxy span), so that one
// trace holds proxy → agent request → run. The queue wait is the time
// from the span's start to its "run.started" event; the span ends with the
// run, its status as run.status. A run created with no span (a cron's, or
// with tracing off) and one queued before a restart of the agent start a
// trace of their own when they execute.

// setRunParent remembers the span a run was created under until it runs.
func (e *Engine) setRunParent(runID string, parent trace.SpanContext) {
	if e.Tracing == nil || !parent.IsValid() {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if lr := e.live[runID]; lr != nil {
		lr.parent = parent
	}
}

// startRunSpan starts run r's span (nil with tracing off).
func (e *Engine) startRunSpan(r *runRecord, lr *liveRun) trace.Span {
	if e.Tracing == nil {
		return nil
	}
	e.mu.Lock()
	parent := lr.parent
	e.mu.Unlock()
	ctx := context.Background()
	start := r.CreatedAt
	if parent.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, parent)
	} else {
		start = time.Now() // its creation belongs to no trace
	}
	_, span := e.Tracing.Start(ctx, "run", trace.WithTimestamp(start), trace.WithAttributes(
		attribute.String("run_id", r.RunID), attribute.String("thread_id", r.ThreadID),
		attribute.String("assistant_id", r.AssistantID)))
	span.AddEvent("run.started", trace.WithAttributes(
		attribute.Float64("run.queue_wait_seconds", time.Since(r.CreatedAt).Seconds())))
	return span
}

// endRunSpan ends a run's span with its graph and outcome; an error or a
// timeout is an error status.
func endRunSpan(span trace.Span, graphID, status string, runErr error) {
	if span == nil {
		return
	}
	if graphID != "" {
		span.SetAttributes(attribute.String("graph_id", graphID))
	}
	span.SetAttributes(attribute.String("run.status", status))
	if status == RunError || status == RunTimeout {
		msg := status
		if runErr != nil {
			msg = runErr.Error()
		}
		span.SetStatus(codes.Error, msg)
	}
	span.End()
}
