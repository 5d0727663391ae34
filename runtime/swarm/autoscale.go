package swarm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/client"
	"github.com/prometheus/client_golang/prometheus"

	"slipway/runtime"
)

// Autoscaling of the queue workers. A scaled revision whose
// queue_max_scale is above its queue_min_scale gets an autoscaler: every
// AutoscaleInterval it reads the deployment's pending runs (the agents'
// lg_api_num_pending_runs, counted in the shared database, so any API
// task tells) and sets the queue service's replica count:
//
//   - up when there is at least one pending run per worker: to
//     current + ceil(pending / current), at most queue_max_scale;
//   - down by one when no run has been pending for ScaleDownAfter (and
//     again after as long once more), at least queue_min_scale.
//
// The two thresholds are the hysteresis: a burst scales up at once, a
// lull must last before a worker goes, so the count does not flap. Each
// decision is a line in the deployment's log (runtime.Output, see
// ScaleEvents) and in Slipway's, and counted in
// slipway_swarm_autoscale_decisions_total; slipway_swarm_queue_workers is
// the count set last. A new revision starts again from queue_min_scale.

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
	decisions *prometheus.CounterVec // deployment_id, direction
	workers   *prometheus.GaugeVec   // deployment_id
}

func (d *Driver) metrics() *autoscaleMetrics {
	d.metricsOnce.Do(func() {
		d.autoMetrics = &autoscaleMetrics{
			decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "slipway_swarm_autoscale_decisions_total",
				Help: "Queue-worker scaling decisions of the swarm runtime's autoscaler, by deployment id and direction (up, down)."},
				[]string{"deployment_id", "direction"}),
			workers: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "slipway_swarm_queue_workers",
				Help: "Queue workers the swarm runtime's autoscaler last set, by deployment id."}, []string{"deployment_id"}),
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
}

func (d *Driver) Collect(ch chan<- prometheus.Metric) {
	m := d.metrics()
	m.decisions.Collect(ch)
	m.workers.Collect(ch)
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
	if s.Scale.Queue == 0 || rs == nil || rs.QueueMaxScale == nil || *rs.QueueMaxScale <= s.Scale.Queue {
		return
	}
	p := &scalePolicy{min: s.Scale.Queue, max: *rs.QueueMaxScale, downAfter: d.scaleDownAfter()}
	ctx, cancel := context.WithCancel(context.Background())
	d.mu.Lock()
	if d.scalers == nil {
		d.scalers = map[string]context.CancelFunc{}
	}
	d.scalers[s.DeploymentID] = cancel
	d.mu.Unlock()
	d.metrics().workers.WithLabelValues(s.DeploymentID).Set(float64(s.Scale.Queue))
	go d.autoscale(ctx, s.DeploymentID, s.RevisionID, p)
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

func (d *Driver) autoscale(ctx context.Context, dep, rev string, p *scalePolicy) {
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
		pending, err := d.pendingRuns(ctx, dep)
		if err != nil {
			d.Log.Debug().Err(err).Str("deployment_id", dep).Msg("autoscale: the pending runs are unknown")
			continue
		}
		svc, err := d.Client.ServiceInspect(ctx, queueServiceName(dep), client.ServiceInspectOptions{})
		if err != nil || svc.Service.Spec.Mode.Replicated == nil || svc.Service.Spec.Mode.Replicated.Replicas == nil {
			continue
		}
		current := int(*svc.Service.Spec.Mode.Replicated.Replicas)
		target, why := p.decide(time.Now(), current, pending)
		if target == current {
			continue
		}
		spec := svc.Service.Spec
		n := uint64(target)
		spec.Mode.Replicated.Replicas = &n
		if _, err := d.Client.ServiceUpdate(ctx, svc.Service.ID, client.ServiceUpdateOptions{Version: svc.Service.Version, Spec: spec,
			EncodedRegistryAuth: d.RegistryAuth}); err != nil {
			d.Log.Warn().Err(err).Str("deployment_id", dep).Msg("autoscale: update the queue service")
			continue
		}
		dir := "up"
		if target < current {
			dir = "down"
		}
		m := d.metrics()
		m.decisions.WithLabelValues(dep, dir).Inc()
		m.workers.WithLabelValues(dep).Set(float64(target))
		line := fmt.Sprintf("autoscale: queue workers %d -> %d (%s; queue_min_scale %d, queue_max_scale %d)", current, target, why, p.min, p.max)
		d.Log.Info().Str("deployment_id", dep).Int("from", current).Int("to", target).Str("why", why).Msg("autoscale: queue workers")
		d.mu.Lock()
		out := d.events
		d.mu.Unlock()
		if out != nil {
			out.Line(runtime.OutputLine{DeploymentID: dep, RevisionID: rev, Stream: "stdout", Time: time.Now(), Text: "[slipway] " + line})
		}
	}
}

var metricsClient = &http.Client{Timeout: 3 * time.Second}

// pendingRuns reads lg_api_num_pending_runs from one of dep's API tasks.
func (d *Driver) pendingRuns(ctx context.Context, dep string) (int, error) {
	eps := d.Endpoints(dep)
	if len(eps) == 0 {
		return 0, errors.New("no API task answers")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, eps[0]+"/metrics", nil)
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
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || name != "lg_api_num_pending_runs" {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return 0, fmt.Errorf("lg_api_num_pending_runs: %w", err)
		}
		return int(f), nil
	}
	return 0, errors.New("the agent's metrics have no lg_api_num_pending_runs")
}
