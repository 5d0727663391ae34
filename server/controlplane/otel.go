package controlplane

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"slipway/oteltrace"
	"slipway/runtime"
)

// revisionSpan starts the span of one phase of a revision's way to serving
// (revision.rollout, and its revision.build and revision.deploy children;
// revision.restore after a restart of Slipway), with the deployment's and
// revision's ids. The reconciler works apart from any request, so a
// rollout is a trace of its own.
func (rc *Reconciler) revisionSpan(ctx context.Context, name string, dep *deploymentRecord, rev *revisionRecord) (context.Context, trace.Span) {
	return rc.Tracing.Start(ctx, name, trace.WithAttributes(
		attribute.String("deployment.id", dep.ID), attribute.String("deployment.name", dep.Name),
		attribute.String("revision.id", rev.ID), attribute.String("slipway.runtime", rc.Driver.Name())))
}

// withAgentEnv gives the revision's agent the operator's OTEL_* variables
// (Reconciler.AgentEnv) that its own secrets do not set.
func (rc *Reconciler) withAgentEnv(sp runtime.Spec) runtime.Spec {
	names := make([]string, 0, len(sp.SecretReferences))
	for _, r := range sp.SecretReferences {
		names = append(names, r.Name)
	}
	sp.Env = oteltrace.WithAgentEnv(sp.Env, rc.OTELEnv, names)
	return sp
}
