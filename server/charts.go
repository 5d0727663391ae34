package server

import (
	"context"
	"math"
	"sort"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// The dashboard's charts: every chart interval (SLIPWAY_CHART_INTERVAL,
// 10 s by default) the control plane reads what each serving agent's
// metrics say, through the same relay as a Prometheus scrape
// (agentGatherer), and keeps per deployment a ring of the last hour at
// that interval and one of the last 24 hours in 5-minute buckets. The
// rings live in memory only: a restart starts them empty (the agents'
// counters restart with their processes anyway, and a time series kept
// across restarts is Prometheus's job, which SLIPWAY_METRICS_ADDR feeds).

// chartOutcomes are the outcomes of slipway_agent_runs_total, in the
// order the API lists them.
var chartOutcomes = []string{"success", "error", "timeout", "cancelled", "interrupted"}

const (
	// chartHour and chartDay are the two windows the API serves.
	chartHour = time.Hour
	chartDay  = 24 * time.Hour
	// chartBucket is the resolution of the 24-hour window: 288 points.
	chartBucket = 5 * time.Minute
)

// The agent's and the relay's families the charts read.
const (
	famRuns     = "slipway_agent_runs_total"
	famDuration = "slipway_agent_run_duration_seconds"
	famPending  = "lg_api_num_pending_runs"
	famRunning  = "lg_api_num_running_runs"
)

// ChartPoint is one point of a deployment's charts: what happened in the
// interval that ended at Time. A null field was not known then (the agent
// did not answer, or nothing was measured: no run ended, no cgroup).
type ChartPoint struct {
	Time time.Time `json:"time" description:"The end of the interval this point covers."`
	// Seconds is the length of the interval: rates are Runs/Seconds.
	Seconds float64            `json:"seconds" description:"The length of the interval the point covers, in seconds."`
	Runs    map[string]float64 `json:"runs" description:"Runs that ended in the interval, by outcome (success, error, timeout, cancelled, interrupted); null when the agent could not be read."`
	P50     *float64           `json:"p50_seconds" description:"Median duration of the runs that ended in the interval (interpolated within the histogram's buckets)."`
	P95     *float64           `json:"p95_seconds" description:"95th percentile duration of the runs that ended in the interval."`
	Pending *float64           `json:"pending_runs" description:"Runs waiting for a worker (the mean over the bucket in the 24 h window)."`
	Running *float64           `json:"running_runs" description:"Runs executing."`
	CPU     *float64           `json:"cpu_cores" description:"CPU used, in cores: CPU seconds per second of the interval."`
	Memory  *float64           `json:"memory_bytes" description:"Memory in use, without inactive page cache."`
}

// ChartSeries is the answer of GET /v2/deployments/{id}/metrics.
type ChartSeries struct {
	DeploymentID string  `json:"deployment_id"`
	Window       string  `json:"window" description:"1h or 24h."`
	Step         float64 `json:"step_seconds" description:"The spacing of the points: the chart interval (1h) or 300 (24h)."`
	// Totals are the runs that ended in the window, by outcome: the sum
	// of the points' runs.
	Totals map[string]float64 `json:"run_totals" description:"Runs that ended within the window, by outcome: the sum of the points."`
	Points []ChartPoint       `json:"points" description:"Oldest first; at most 1 h / step_seconds (1h) or 288 (24h)."`
}

// chartSnapshot is what one read of a deployment's agent said: counters
// as they stand, not yet differences.
type chartSnapshot struct {
	at       time.Time
	ok       bool // the agent's metrics were read
	runs     map[string]float64
	buckets  []bucket // run durations, all outcomes summed; cumulative, +Inf last
	pending  *float64 // nil: the agent does not expose it
	running  *float64
	cpu, mem float64
	hasCPU   bool
	hasMem   bool
}

// bucket is a histogram bucket: how many observations were ≤ le.
type bucket struct{ le, n float64 }

// counterDelta is how much a counter grew from prev to cur. A counter
// that went down was reset (the agent restarted): it counted cur since,
// as Prometheus's increase() reads it; never negative.
func counterDelta(prev, cur float64) float64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

// bucketDeltas are the observations made between two reads of a
// cumulative histogram. A reset (any bucket went down, or the layout
// changed) means cur counted everything since the restart.
func bucketDeltas(prev, cur []bucket) []bucket {
	out := make([]bucket, len(cur))
	copy(out, cur)
	if len(prev) != len(cur) {
		return out
	}
	for i := range cur {
		if prev[i].le != cur[i].le || cur[i].n < prev[i].n {
			copy(out, cur)
			return out
		}
		out[i].n = cur[i].n - prev[i].n
	}
	return out
}

// quantile is the q-quantile of a cumulative histogram, interpolated
// linearly within the bucket it falls in, as Prometheus's
// histogram_quantile does: in the +Inf bucket it is the highest finite
// bound. false when the histogram is empty.
func quantile(q float64, bs []bucket) (float64, bool) {
	if len(bs) == 0 || bs[len(bs)-1].n <= 0 {
		return 0, false
	}
	rank := q * bs[len(bs)-1].n
	lower, below := 0.0, 0.0
	for i, b := range bs {
		if b.n >= rank && b.n > below {
			if math.IsInf(b.le, 1) {
				if i == 0 {
					return 0, false
				}
				return bs[i-1].le, true
			}
			return lower + (b.le-lower)*(rank-below)/(b.n-below), true
		}
		lower, below = b.le, b.n
	}
	return lower, true
}

// chartPoint is the point of the interval between two reads, and the
// bucket deltas of its run durations (which downsampling adds up).
func chartPoint(prev *chartSnapshot, cur chartSnapshot) (ChartPoint, []bucket) {
	p := ChartPoint{Time: cur.at}
	if prev != nil {
		p.Seconds = cur.at.Sub(prev.at).Seconds()
	}
	if cur.hasMem {
		p.Memory = ptr(cur.mem)
	}
	if prev != nil && prev.hasCPU && cur.hasCPU && p.Seconds > 0 {
		// Over the time since the counters' read, which is longer than
		// an interval after the agent did not answer.
		p.CPU = ptr(counterDelta(prev.cpu, cur.cpu) / p.Seconds)
	}
	if !cur.ok {
		return p, nil
	}
	p.Pending, p.Running = cur.pending, cur.running
	if prev == nil || !prev.ok {
		// The first read of an agent is the baseline: what it counted
		// before is not placed in time.
		return p, nil
	}
	// One counter gone down means the agent restarted: all its counters
	// started again from zero, even those that since passed their old
	// value.
	reset := len(cur.buckets) > 0 && len(prev.buckets) > 0 && cur.buckets[len(cur.buckets)-1].n < prev.buckets[len(prev.buckets)-1].n
	for _, o := range chartOutcomes {
		reset = reset || cur.runs[o] < prev.runs[o]
	}
	base, baseBuckets := prev.runs, prev.buckets
	if reset {
		base, baseBuckets = nil, nil
	}
	p.Runs = map[string]float64{}
	for _, o := range chartOutcomes {
		p.Runs[o] = counterDelta(base[o], cur.runs[o])
	}
	d := bucketDeltas(baseBuckets, cur.buckets)
	p.P50, p.P95 = quantiles(d)
	return p, d
}

func quantiles(bs []bucket) (p50, p95 *float64) {
	if v, ok := quantile(0.5, bs); ok {
		p50 = ptr(v)
	}
	if v, ok := quantile(0.95, bs); ok {
		p95 = ptr(v)
	}
	return p50, p95
}

func ptr(v float64) *float64 { return &v }

// downsample folds points into one of the 24-hour window: runs and
// durations added up (quantiles from the summed bucket deltas), gauges
// averaged, CPU weighted by each point's length.
type downsample struct {
	start                   time.Time // the bucket's start (a multiple of chartBucket)
	end                     time.Time // the last point's time
	n                       int
	runs                    map[string]float64
	buckets                 []bucket
	pending, running, mem   sums
	cpuCoreSeconds, cpuSecs float64
	seconds                 float64
}

type sums struct {
	sum float64
	n   int
}

func (s *sums) add(v *float64) {
	if v != nil {
		s.sum += *v
		s.n++
	}
}

func (s sums) mean() *float64 {
	if s.n == 0 {
		return nil
	}
	return ptr(s.sum / float64(s.n))
}

func (d *downsample) add(p ChartPoint, bs []bucket) {
	d.n++
	d.end = p.Time
	d.seconds += p.Seconds
	if p.Runs != nil {
		if d.runs == nil {
			d.runs = map[string]float64{}
		}
		for o, v := range p.Runs {
			d.runs[o] += v
		}
	}
	if len(bs) > 0 {
		d.buckets = addBuckets(d.buckets, bs)
	}
	d.pending.add(p.Pending)
	d.running.add(p.Running)
	d.mem.add(p.Memory)
	if p.CPU != nil {
		d.cpuCoreSeconds += *p.CPU * p.Seconds
		d.cpuSecs += p.Seconds
	}
}

// addBuckets sums two cumulative histograms bound by bound.
func addBuckets(a, b []bucket) []bucket {
	byLE := map[float64]float64{}
	for _, x := range a {
		byLE[x.le] += x.n
	}
	for _, x := range b {
		byLE[x.le] += x.n
	}
	out := make([]bucket, 0, len(byLE))
	for le, n := range byLE {
		out = append(out, bucket{le, n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].le < out[j].le })
	return out
}

// point is the bucket as one point, stamped with its last read.
func (d *downsample) point() ChartPoint {
	p := ChartPoint{Time: d.end, Seconds: d.seconds, Runs: d.runs,
		Pending: d.pending.mean(), Running: d.running.mean(), Memory: d.mem.mean()}
	p.P50, p.P95 = quantiles(d.buckets)
	if d.cpuSecs > 0 {
		p.CPU = ptr(d.cpuCoreSeconds / d.cpuSecs)
	}
	return p
}

// ring keeps the last len(buf) values.
type ring[T any] struct {
	buf  []T
	next int
	full bool
}

func newRing[T any](n int) ring[T] { return ring[T]{buf: make([]T, n)} }

func (r *ring[T]) push(v T) {
	r.buf[r.next] = v
	r.next = (r.next + 1) % len(r.buf)
	if r.next == 0 {
		r.full = true
	}
}

// items are the values oldest first.
func (r *ring[T]) items() []T {
	if !r.full {
		return append([]T(nil), r.buf[:r.next]...)
	}
	return append(append([]T(nil), r.buf[r.next:]...), r.buf[:r.next]...)
}

// packed is a ChartPoint as the rings keep it: flat, without the map and
// pointers, so a point takes about 100 bytes (NaN: null).
type packed struct {
	at                                   time.Time
	seconds                              float64
	runs                                 [5]float64 // by chartOutcomes; NaN in runs[0]: null
	p50, p95, pending, running, cpu, mem float64
}

func pack(p ChartPoint) packed {
	v := func(f *float64) float64 {
		if f == nil {
			return math.NaN()
		}
		return *f
	}
	out := packed{at: p.Time, seconds: p.Seconds, p50: v(p.P50), p95: v(p.P95), pending: v(p.Pending), running: v(p.Running), cpu: v(p.CPU), mem: v(p.Memory)}
	out.runs[0] = math.NaN()
	if p.Runs != nil {
		for i, o := range chartOutcomes {
			out.runs[i] = p.Runs[o]
		}
	}
	return out
}

func (k packed) point() ChartPoint {
	v := func(f float64) *float64 {
		if math.IsNaN(f) {
			return nil
		}
		return ptr(f)
	}
	p := ChartPoint{Time: k.at, Seconds: k.seconds, P50: v(k.p50), P95: v(k.p95), Pending: v(k.pending), Running: v(k.running), CPU: v(k.cpu), Memory: v(k.mem)}
	if !math.IsNaN(k.runs[0]) {
		p.Runs = make(map[string]float64, len(chartOutcomes))
		for i, o := range chartOutcomes {
			p.Runs[o] = k.runs[i]
		}
	}
	return p
}

// depChart is one deployment's rings.
type depChart struct {
	prev *chartSnapshot
	last time.Time    // the last point's time
	fine ring[packed] // the last hour at the chart interval
	day  ring[packed] // closed 5-minute buckets of the last 24 h
	open *downsample  // the bucket being filled
}

func newDepChart(interval time.Duration) *depChart {
	return &depChart{fine: newRing[packed](int(chartHour / interval)), day: newRing[packed](int(chartDay / chartBucket))}
}

// record adds a read: one point, folded into its 5-minute bucket too.
func (d *depChart) record(s chartSnapshot) {
	p, bs := chartPoint(d.prev, s)
	// A point covers the time since the point before, whatever read its
	// counters are compared with.
	p.Seconds = 0
	if !d.last.IsZero() {
		p.Seconds = s.at.Sub(d.last).Seconds()
	}
	d.last = s.at
	// While the agent does not answer, the last counters read stay the
	// baseline: the runs made meanwhile count at its next answer, over
	// the whole time since.
	if s.ok || d.prev == nil || !d.prev.ok {
		d.prev = &s
	}
	d.fine.push(pack(p))
	start := s.at.Truncate(chartBucket)
	if d.open != nil && !d.open.start.Equal(start) {
		d.day.push(pack(d.open.point()))
		d.open = nil
	}
	if d.open == nil {
		d.open = &downsample{start: start}
	}
	d.open.add(p, bs)
}

// charts samples the agents and keeps every deployment's rings.
type charts struct {
	interval time.Duration
	// gather reads every serving agent (agentGatherer.Gather).
	gather func() ([]*dto.MetricFamily, error)
	// exists says whether a deployment is still there: a deleted one's
	// rings are dropped.
	exists func(dep string) bool

	mu   sync.Mutex
	deps map[string]*depChart
	done chan struct{} // closed when run returns
}

func newCharts(interval time.Duration, gather func() ([]*dto.MetricFamily, error), exists func(string) bool) *charts {
	return &charts{interval: interval, gather: gather, exists: exists, deps: map[string]*depChart{}}
}

// Start samples every interval until ctx ends; Wait waits for it.
func (c *charts) Start(ctx context.Context) {
	c.done = make(chan struct{})
	go func() {
		defer close(c.done)
		c.run(ctx)
	}()
}

func (c *charts) Wait() {
	if c.done != nil {
		<-c.done
	}
}

func (c *charts) run(ctx context.Context) {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			c.sample(now)
		}
	}
}

// sample reads the agents once and records what they said at now.
func (c *charts) sample(now time.Time) {
	fams, _ := c.gather() // the relay reports each agent's failure as scrape_up 0
	snaps := snapshots(fams, now)
	c.mu.Lock()
	defer c.mu.Unlock()
	for dep, s := range snaps {
		d, ok := c.deps[dep]
		if !ok {
			d = newDepChart(c.interval)
			c.deps[dep] = d
		}
		d.record(s)
	}
	for dep, d := range c.deps {
		if _, ok := snaps[dep]; ok {
			continue
		}
		if !c.exists(dep) {
			delete(c.deps, dep)
			continue
		}
		d.record(chartSnapshot{at: now}) // not serving now: a gap
	}
}

// snapshots splits a relay's families by deployment.
func snapshots(fams []*dto.MetricFamily, now time.Time) map[string]chartSnapshot {
	out := map[string]chartSnapshot{}
	get := func(dep string) chartSnapshot {
		s, ok := out[dep]
		if !ok {
			s = chartSnapshot{at: now, runs: map[string]float64{}}
		}
		return s
	}
	durations := map[string]map[float64]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			dep, outcome := "", ""
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case labelDeployment:
					dep = l.GetValue()
				case "outcome":
					outcome = l.GetValue()
				}
			}
			if dep == "" {
				continue
			}
			s := get(dep)
			switch f.GetName() {
			case metricScrapeUp:
				s.ok = m.GetGauge().GetValue() == 1
			case metricCPU:
				s.cpu, s.hasCPU = m.GetCounter().GetValue(), true
			case metricMemory:
				s.mem, s.hasMem = m.GetGauge().GetValue(), true
			case famRuns:
				s.runs[outcome] += m.GetCounter().GetValue()
			case famPending:
				s.pending = ptr(m.GetGauge().GetValue())
			case famRunning:
				s.running = ptr(m.GetGauge().GetValue())
			case famDuration:
				h := m.GetHistogram()
				if durations[dep] == nil {
					durations[dep] = map[float64]float64{}
				}
				for _, b := range h.GetBucket() {
					if !math.IsInf(b.GetUpperBound(), 1) {
						durations[dep][b.GetUpperBound()] += float64(b.GetCumulativeCount())
					}
				}
				durations[dep][math.Inf(1)] += float64(h.GetSampleCount())
			}
			out[dep] = s
		}
	}
	for dep, byLE := range durations {
		s := out[dep]
		for le, n := range byLE {
			s.buckets = append(s.buckets, bucket{le, n})
		}
		sort.Slice(s.buckets, func(i, j int) bool { return s.buckets[i].le < s.buckets[j].le })
		out[dep] = s
	}
	return out
}

// series is a deployment's window ("1h" or "24h") as of now; a
// deployment not sampled yet has no points.
func (c *charts) series(dep, window string, now time.Time) ChartSeries {
	out := ChartSeries{DeploymentID: dep, Window: window, Totals: map[string]float64{}, Points: []ChartPoint{}}
	for _, o := range chartOutcomes {
		out.Totals[o] = 0
	}
	span, step := chartHour, c.interval
	if window == "24h" {
		span, step = chartDay, chartBucket
	}
	out.Step = step.Seconds()
	c.mu.Lock()
	var pts []packed
	if d, ok := c.deps[dep]; ok {
		if window == "24h" {
			pts = d.day.items()
			if d.open != nil {
				pts = append(pts, pack(d.open.point()))
			}
		} else {
			pts = d.fine.items()
		}
	}
	c.mu.Unlock()
	from := now.Add(-span)
	for _, k := range pts {
		p := k.point()
		if !p.Time.After(from) {
			continue
		}
		for o, v := range p.Runs {
			out.Totals[o] += v
		}
		out.Points = append(out.Points, p)
	}
	return out
}
