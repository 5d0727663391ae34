package agent

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"slipway/runtime/agent/hosts"
)

// Run outcomes, the outcome label of the run counters: how a run that was
// created ended. A run that stopped at a graph interrupt (waiting for a
// human) is interrupted, not success; one stopped by a cancel (interrupt
// or rollback, running or still pending) is cancelled.
const (
	OutcomeSuccess     = "success"
	OutcomeError       = "error"
	OutcomeTimeout     = "timeout"
	OutcomeCancelled   = "cancelled"
	OutcomeInterrupted = "interrupted"
)

var runOutcomes = []string{OutcomeSuccess, OutcomeError, OutcomeTimeout, OutcomeCancelled, OutcomeInterrupted}

// Metrics are an agent's Prometheus metrics, on a registry of its own
// (several engines live in one test process). The run path touches only
// children resolved here, once: no label lookup, map or lock per run.
// A nil *Metrics records nothing.
type Metrics struct {
	Registry *prometheus.Registry

	created   prometheus.Counter
	ended     map[string]prometheus.Counter
	duration  map[string]prometheus.Observer
	queueWait prometheus.Observer
	streams   prometheus.Gauge
	cpWrite   prometheus.Observer
	// HTTPRequests is lg_api_http_requests_total, the reference server's
	// request counter (method, path pattern, status class); agentapi
	// counts into it.
	HTTPRequests *prometheus.CounterVec

	engine atomic.Pointer[Engine] // the engine the gauges read (attach)
}

// runBuckets span a quick graph (milliseconds) to a long agent (an hour).
var runBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

// NewMetrics makes an agent's metrics; the engine given them in
// Engine.Metrics feeds their gauges from Start on.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	created := prometheus.NewCounter(prometheus.CounterOpts{Name: "slipway_agent_runs_created_total",
		Help: "Runs created (accepted by the API or a cron)."})
	ended := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "slipway_agent_runs_total",
		Help: "Runs that ended, by outcome (success, error, timeout, cancelled, interrupted)."}, []string{"outcome"})
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "slipway_agent_run_duration_seconds",
		Help: "How long runs executed, from start to end, by outcome (runs cancelled before they started are not here).", Buckets: runBuckets},
		[]string{"outcome"})
	wait := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "slipway_agent_run_queue_wait_seconds",
		Help: "How long runs waited between creation (or their after_seconds) and their start.", Buckets: runBuckets})
	streams := prometheus.NewGauge(prometheus.GaugeOpts{Name: "slipway_agent_sse_streams_open",
		Help: "Server-sent event streams of runs open now."})
	cp := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "slipway_agent_checkpoint_write_duration_seconds",
		Help:    "Latency of checkpoint writes from the language hosts (cp.put).",
		Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}})
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lg_api_http_requests_total",
		Help: "Total number of HTTP requests, by method, path pattern and status class."}, []string{"method", "path", "status"})
	reg.MustRegister(created, ended, duration, wait, streams, cp, reqs)
	m := &Metrics{Registry: reg, created: created, queueWait: wait, streams: streams, cpWrite: cp, HTTPRequests: reqs,
		ended: map[string]prometheus.Counter{}, duration: map[string]prometheus.Observer{}}
	for _, o := range runOutcomes {
		m.ended[o] = ended.WithLabelValues(o)
		m.duration[o] = duration.WithLabelValues(o)
	}
	reg.MustRegister(m.gauges()...)
	return m
}

// attach points the gauges at the engine they read at scrape time.
func (m *Metrics) attach(e *Engine) {
	if m != nil {
		m.engine.Store(e)
	}
}

// gauges are read from the engine at scrape time (0 before Start).
func (m *Metrics) gauges() []prometheus.Collector {
	engine := func(f func(e *Engine) float64) func() float64 {
		return func() float64 {
			if e := m.engine.Load(); e != nil {
				return f(e)
			}
			return 0
		}
	}
	gauge := func(name, help string, f func(e *Engine) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, engine(f))
	}
	return []prometheus.Collector{
		gauge("lg_api_num_pending_runs", "The number of runs currently pending.", func(e *Engine) float64 {
			p, _ := e.runCounts()
			return float64(p)
		}),
		gauge("lg_api_num_running_runs", "The number of runs currently running.", func(e *Engine) float64 {
			_, r := e.runCounts()
			return float64(r)
		}),
		gauge("lg_api_workers_max", "The number of runs the agent executes at once (SLIPWAY_AGENT_WORKERS).",
			func(e *Engine) float64 { return float64(cap(e.sem)) }),
		gauge("lg_api_workers_active", "Workers executing a run (or claiming one) now.",
			func(e *Engine) float64 { return float64(len(e.sem)) }),
		gauge("lg_api_workers_available", "Workers free to start a run now.",
			func(e *Engine) float64 { return float64(cap(e.sem) - len(e.sem)) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "slipway_agent_host_restarts_total",
			Help: "Times a language host (Python, JavaScript) died and was started again."},
			engine(func(e *Engine) float64 { return float64(e.hostRestarts()) })),
	}
}

// runCounts counts the pending and running runs from the engine's own
// queue records: only threads in the busy index are read, and of them
// only their queue.
func (e *Engine) runCounts() (pending, running int) {
	_ = e.store.View(context.Background(), func(tx ReadTx) error {
		var err error
		pending, running, err = tx.CountBusy()
		return err
	})
	return pending, running
}

// hostRestarts sums the restarts of the engine's language hosts.
func (e *Engine) hostRestarts() int64 {
	seen := map[*hosts.Pool]bool{}
	var n int64
	add := func(h *hosts.Pool) {
		if h != nil && !seen[h] {
			seen[h] = true
			n += h.Restarts()
		}
	}
	for _, g := range e.Graphs {
		if hg, ok := g.(*HostGraph); ok {
			add(hg.host)
		}
	}
	if e.App != nil {
		add(e.App.host)
	}
	return n
}

func (m *Metrics) runCreated() {
	if m != nil {
		m.created.Inc()
	}
}

// runStarted records how long the run waited for its start.
func (m *Metrics) runStarted(r *runRecord, now time.Time) {
	if m == nil {
		return
	}
	from := r.CreatedAt
	if r.NotBefore != nil && r.NotBefore.After(from) {
		from = *r.NotBefore
	}
	m.queueWait.Observe(max(now.Sub(from), 0).Seconds())
}

// runEnded records a run that executed for d and ended with outcome.
func (m *Metrics) runEnded(outcome string, d time.Duration) {
	if m == nil || outcome == "" {
		return
	}
	m.ended[outcome].Inc()
	m.duration[outcome].Observe(d.Seconds())
}

// pendingCancelled records a run cancelled before it started.
func (m *Metrics) pendingCancelled() {
	if m != nil {
		m.ended[OutcomeCancelled].Inc()
	}
}

// StreamOpened counts an SSE stream of a run until the returned func is
// called.
func (m *Metrics) StreamOpened() func() {
	if m == nil {
		return func() {}
	}
	m.streams.Inc()
	return m.streams.Dec
}

// checkpointWritten records a checkpoint write that began at start.
func (m *Metrics) checkpointWritten(start time.Time) {
	if m != nil {
		m.cpWrite.Observe(time.Since(start).Seconds())
	}
}

// outcomeOf is the outcome label of a run that ended with the recorded
// status; waiting is whether it stopped at a graph interrupt.
func outcomeOf(status string, waiting bool) string {
	switch status {
	case RunSuccess:
		if waiting {
			return OutcomeInterrupted
		}
		return OutcomeSuccess
	case RunError:
		return OutcomeError
	case RunTimeout:
		return OutcomeTimeout
	case RunInterrupted, "rollback":
		return OutcomeCancelled
	}
	return ""
}
