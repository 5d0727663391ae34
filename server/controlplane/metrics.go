package controlplane

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics count the reconciler's work: builds and deploys with their
// durations and outcomes, the jobs it starts and the health checks of
// serving agents. A nil *Metrics records nothing (metrics off). Every
// event here is rare (a build, a check every few seconds per deployment),
// so the label lookups are not on any hot path.
type Metrics struct {
	phases  *prometheus.CounterVec   // phase (build, deploy), outcome
	seconds *prometheus.HistogramVec // phase, outcome
	jobs    *prometheus.CounterVec   // kind
	checks  *prometheus.CounterVec   // outcome
}

// Phase outcomes: the phase succeeded, failed, or a newer revision (or a
// deletion) replaced the revision while it ran.
const (
	OutcomeSuccess    = "success"
	OutcomeFailure    = "failure"
	OutcomeSuperseded = "superseded"
)

// NewMetrics registers the reconciler's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		phases: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "slipway_rollout_phases_total",
			Help: "Builds and deploys of revisions that ended, by phase (build, deploy) and outcome (success, failure, superseded)."},
			[]string{"phase", "outcome"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "slipway_rollout_phase_duration_seconds",
			Help:    "How long builds and deploys of revisions took, by phase and outcome.",
			Buckets: []float64{0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}},
			[]string{"phase", "outcome"}),
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "slipway_reconcile_jobs_total",
			Help: "Reconciler jobs started, by kind (rollout: build and deploy a revision; restore: start the active revision again; remove: delete a deployment)."},
			[]string{"kind"}),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "slipway_health_checks_total",
			Help: "Health checks of serving agents, by outcome (healthy, unhealthy)."},
			[]string{"outcome"}),
	}
	reg.MustRegister(m.phases, m.seconds, m.jobs, m.checks)
	return m
}

// phase records the end of a build or deploy that began at start.
func (m *Metrics) phase(phase, outcome string, start time.Time) {
	if m == nil {
		return
	}
	m.phases.WithLabelValues(phase, outcome).Inc()
	m.seconds.WithLabelValues(phase, outcome).Observe(time.Since(start).Seconds())
}

// job records a reconciler job of kind starting.
func (m *Metrics) job(kind string) {
	if m == nil {
		return
	}
	m.jobs.WithLabelValues(kind).Inc()
}

// checked wraps a health check to count its outcomes.
func (m *Metrics) checked(check func(ctx context.Context, dep, rev string) error) func(ctx context.Context, dep, rev string) error {
	if m == nil {
		return check
	}
	healthy, unhealthy := m.checks.WithLabelValues("healthy"), m.checks.WithLabelValues("unhealthy")
	return func(ctx context.Context, dep, rev string) error {
		err := check(ctx, dep, rev)
		if err != nil {
			unhealthy.Inc()
		} else {
			healthy.Inc()
		}
		return err
	}
}

// outcomeOf is a phase's outcome from its context and error.
func outcomeOf(ctx context.Context, err error) string {
	switch {
	case ctx.Err() != nil:
		return OutcomeSuperseded
	case err != nil:
		return OutcomeFailure
	}
	return OutcomeSuccess
}

// ServingDeployments are the ids of the deployments with an active
// revision (the agents a metrics scrape relays).
func (s *Service) ServingDeployments() []string {
	rc, ok := s.rec.(*Reconciler)
	if !ok {
		return nil
	}
	targets := rc.healthTargets()
	out := make([]string, 0, len(targets))
	for _, t := range targets {
		out = append(out, t.Deployment)
	}
	return out
}
