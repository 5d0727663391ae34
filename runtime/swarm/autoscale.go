package swarm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/moby/moby/client"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"slipway/runtime"
)

// Autoscaling of a scaled revision's services. A scaled revision gets an
// autoscaler when its queue_max_scale is above its queue_min_scale (the
// queue workers) or its max_scale above its min_scale (the API replicas).
// Every AutoscaleInterval it reads what the agents measure and sets the
// services' replica counts.
//
// Queue workers follow the deployment's pending runs (the agents'
// lg_api_num_pending_runs, counted in the shared database, so any API
// task tells):
//
//   - up when there is at least one pending run per worker: to
//     current + ceil(pending / current), at most queue_max_scale;
//   - down by one when no run has been pending for ScaleDownAfter (and
//     again after as long once more), at least queue_min_scale.
//
// API replicas follow the request rate (autoscale_api.go).
//
// The two thresholds of each are the hysteresis: a burst scales up at
// once, a lull must last before a replica goes, so the count does not
// flap. Each decision is a line in the deployment's log (runtime.Output,
// see ScaleEvents) and in Slipway's, and counted in
// slipway_swarm_autoscale_decisions_total; slipway_swarm_queue_workers and
// slipway_swarm_api_replicas are the counts set last. A new revision
// starts again from its minimums.

// Defaults of the autoscaler's timing.
const (
	DefaultAutoscaleInterval = 5 * time.Second
	DefaultScaleDownAfter    = 30 * time.Second
)

// scalePolicy decides the queue workers' count from the pending runs.
type scalePolicy struct {
	min, max  int
	downAfter time.Duration
	idleSince time.Time // since when no run has been pending; zero: some are
}

// decide returns the count to set (current when nothing changes) and why.
func (p *scalePolicy) decide(now time.Time, current, pending int) (int, string) {
	if pending > 0 {
		p.idleSince = time.Time{}
		per := max(current, 1)
		if pending >= per && current < p.max {
			target := min(p.max, current+(pending+per-1)/per)
			return target, fmt.Sprintf("%d runs pending for %d queue workers (at least one per worker)", pending, current)
		}
		return current, ""
	}
	if p.idleSince.IsZero() {
		p.idleSince = now
		return current, ""
	}
	if current > p.min && now.Sub(p.idleSince) >= p.downAfter {
		p.idleSince = now // the next step down waits as long again
		return current - 1, fmt.Sprintf("no run pending for %v", p.downAfter.Round(time.Second))
	}
	return current, ""
}

// autoscaleMetrics are the autoscaler's series, collected with Slipway's
// metrics (the driver is a prometheus.Collector).
type autoscaleMetrics struct {
	decisions *prometheus.CounterVec // deployment_id, service, direction
	workers   *prometheus.GaugeVec   // deployment_id
	api       *prometheus.GaugeVec   // deployment_id
}

func (d *Driver) metrics() *autoscaleMetrics {
	d.metricsOnce.Do(func() {
		d.autoMetrics = &autoscaleMetrics{
			decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "slipway_swarm_autoscale_decisions_total",
				Help: "Scaling decisions of the swarm runtime's autoscaler, by deployment id, service (api, queue) and direction (up, down)."},
				[]string{"deployment_id", "service", "direction"}),
			workers: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "slipway_swarm_queue_workers",
				Help: "Queue workers the swarm runtime's autoscaler last set, by deployment id."}, []string{"deployment_id"}),
			api: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "slipway_swarm_api_replicas",
				Help: "API replicas the swarm runtime's autoscaler last set, by deployment id."}, []string{"deployment_id"}),
		}
	})
	return d.autoMetrics
}

// Describe and Collect make the driver a prometheus.Collector of the
// autoscaler's metrics.
func (d *Driver) Describe(ch chan<- *prometheus.Desc) {
	m := d.metrics()
	m.decisions.Describe(ch)
	m.workers.Describe(ch)
	m.api.Describe(ch)
}

func (d *Driver) Collect(ch chan<- prometheus.Metric) {
	m := d.metrics()
	m.decisions.Collect(ch)
	m.workers.Collect(ch)
	m.api.Collect(ch)
}

// ScaleEvents is where the autoscaler writes its decisions, as lines of
// the deployment's log.
func (d *Driver) ScaleEvents(out runtime.Output) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.events = out
}

// startAutoscale starts (or replaces) dep's autoscaler for revision s, or
// stops it when the revision has nothing to scale.
func (d *Driver) startAutoscale(s runtime.Spec) {
	d.stopAutoscale(s.DeploymentID)
	rs := s.ResourceSpec
	var queue *scalePolicy
	if s.Scale.Queue > 0 && rs != nil && rs.QueueMaxScale != nil && *rs.QueueMaxScale > s.Scale.Queue {
		queue = &scalePolicy{min: s.Scale.Queue, max: *rs.QueueMaxScale, downAfter: d.scaleDownAfter()}
	}
	var api *apiPolicy
	if n := max(s.Scale.API, 1); s.Scale.Scaled() && rs != nil && rs.MaxScale != nil && *rs.MaxScale > n {
		api = &apiPolicy{min: n, max: *rs.MaxScale, target: d.apiTarget(), downAfter: d.scaleDownAfter()}
	}
	if queue == nil && api == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.mu.Lock()
	if d.scalers == nil {
		d.scalers = map[string]context.CancelFunc{}
	}
	d.scalers[s.DeploymentID] = cancel
	d.mu.Unlock()
	m := d.metrics()
	if queue != nil {
		m.workers.WithLabelValues(s.DeploymentID).Set(float64(queue.min))
	}
	if api != nil {
		m.api.WithLabelValues(s.DeploymentID).Set(float64(api.min))
	}
	go d.autoscale(ctx, s.DeploymentID, s.RevisionID, queue, api)
}

func (d *Driver) stopAutoscale(dep string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if cancel, ok := d.scalers[dep]; ok {
		cancel()
		delete(d.scalers, dep)
	}
}

func (d *Driver) scaleDownAfter() time.Duration {
	if d.ScaleDownAfter > 0 {
		return d.ScaleDownAfter
	}
	return DefaultScaleDownAfter
}

// autoscale runs dep's autoscaler until ctx ends: queue and api are the
// policies of the services it scales (nil: that one is not scaled).
func (d *Driver) autoscale(ctx context.Context, dep, rev string, queue *scalePolicy, api *apiPolicy) {
	every := d.AutoscaleInterval
	if every <= 0 {
		every = DefaultAutoscaleInterval
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if queue != nil {
			if pending, err := d.pendingRuns(ctx, dep); err != nil {
				d.Log.Debug().Err(err).Str("deployment_id", dep).Msg("autoscale: the pending runs are unknown")
			} else {
				d.scaleService(ctx, dep, rev, "queue", func(current int) (int, string) {
					return queue.decide(time.Now(), current, pending)
				}, fmt.Sprintf("queue_min_scale %d, queue_max_scale %d", queue.min, queue.max))
			}
		}
		if api != nil {
			if rate, ok := d.requestRate(ctx, dep, api, time.Now()); ok {
				d.scaleService(ctx, dep, rev, "api", func(current int) (int, string) {
					return api.decide(time.Now(), current, rate)
				}, fmt.Sprintf("min_scale %d, max_scale %d", api.min, api.max))
			}
		}
	}
}

// scaleService sets the replicas of dep's service of role ("api" or
// "queue") to what decide says for its current count, and tells: a line
// in the deployment's log and Slipway's, the metrics.
func (d *Driver) scaleService(ctx context.Context, dep, rev, role string, decide func(current int) (int, string), bounds string) {
	name, what, gauge := queueServiceName(dep), "queue workers", d.metrics().workers
	if role == "api" {
		name, what, gauge = serviceName(dep), "API replicas", d.metrics().api
	}
	svc, err := d.Client.ServiceInspect(ctx, name, client.ServiceInspectOptions{})
	if err != nil || svc.Service.Spec.Mode.Replicated == nil || svc.Service.Spec.Mode.Replicated.Replicas == nil {
		return
	}
	current := int(*svc.Service.Spec.Mode.Replicated.Replicas)
	target, why := decide(current)
	if target == current {
		return
	}
	spec := svc.Service.Spec
	n := uint64(target)
	spec.Mode.Replicated.Replicas = &n
	if _, err := d.Client.ServiceUpdate(ctx, svc.Service.ID, client.ServiceUpdateOptions{Version: svc.Service.Version, Spec: spec,
		EncodedRegistryAuth: d.RegistryAuth}); err != nil {
		d.Log.Warn().Err(err).Str("deployment_id", dep).Msgf("autoscale: update the %s service", role)
		return
	}
	dir := "up"
	if target < current {
		dir = "down"
	}
	d.metrics().decisions.WithLabelValues(dep, role, dir).Inc()
	gauge.WithLabelValues(dep).Set(float64(target))
	line := fmt.Sprintf("autoscale: %s %d -> %d (%s; %s)", what, current, target, why, bounds)
	d.Log.Info().Str("deployment_id", dep).Str("service", role).Int("from", current).Int("to", target).Str("why", why).Msg("autoscale: " + what)
	d.mu.Lock()
	out := d.events
	d.mu.Unlock()
	if out != nil {
		out.Line(runtime.OutputLine{DeploymentID: dep, RevisionID: rev, Stream: "stdout", Time: time.Now(), Text: "[slipway] " + line})
	}
}

var metricsClient = &http.Client{Timeout: 3 * time.Second}

// pendingRuns reads lg_api_num_pending_runs from one of dep's API tasks.
func (d *Driver) pendingRuns(ctx context.Context, dep string) (int, error) {
	eps := d.Endpoints(dep)
	if len(eps) == 0 {
		return 0, errors.New("no API task answers")
	}
	v, err := scrapeSum(ctx, eps[0], "lg_api_num_pending_runs")
	return int(v), err
}

// scrapeSum reads an agent's /metrics (endpoint is its base URL, the
// agent's token as the password) and sums the samples of the family
// name: a gauge's or a counter's value over all its label sets; 0 when
// the family has no sample (a counter vector nothing was counted in yet).
func scrapeSum(ctx context.Context, endpoint, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	if u := req.URL.User; u != nil {
		pw, _ := u.Password()
		req.URL.User = nil
		req.Header.Set(runtime.AgentTokenHeader, pw)
	}
	resp, err := metricsClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return 0, fmt.Errorf("parse the agent's metrics: %w", err)
	}
	var sum float64
	for _, m := range fams[name].GetMetric() {
		switch {
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		}
	}
	return sum, nil
}
