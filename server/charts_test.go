package server

import (
	"context"
	"math"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

func TestChartCounterDelta(t *testing.T) {
	for _, c := range []struct {
		name            string
		prev, cur, want float64
	}{
		{"grew", 3, 7, 4},
		{"unchanged", 5, 5, 0},
		{"reset by an agent restart: counted cur since", 9, 2, 2},
		{"reset to zero", 9, 0, 0},
		{"from zero", 0, 6, 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := counterDelta(c.prev, c.cur); got != c.want {
				t.Fatalf("counterDelta(%v, %v) = %v, want %v", c.prev, c.cur, got, c.want)
			}
		})
	}
}

var inf = math.Inf(1)

func TestChartBucketDeltas(t *testing.T) {
	for _, c := range []struct {
		name            string
		prev, cur, want []bucket
	}{
		{"observations between two reads",
			[]bucket{{1, 2}, {5, 4}, {inf, 5}}, []bucket{{1, 3}, {5, 7}, {inf, 9}}, []bucket{{1, 1}, {5, 3}, {inf, 4}}},
		{"nothing new", []bucket{{1, 2}, {inf, 2}}, []bucket{{1, 2}, {inf, 2}}, []bucket{{1, 0}, {inf, 0}}},
		{"reset: cur is everything since the restart",
			[]bucket{{1, 5}, {5, 8}, {inf, 9}}, []bucket{{1, 1}, {5, 1}, {inf, 2}}, []bucket{{1, 1}, {5, 1}, {inf, 2}}},
		{"first read", nil, []bucket{{1, 1}, {inf, 1}}, []bucket{{1, 1}, {inf, 1}}},
		{"layout changed", []bucket{{2, 1}, {inf, 1}}, []bucket{{1, 3}, {inf, 3}}, []bucket{{1, 3}, {inf, 3}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := bucketDeltas(c.prev, c.cur)
			if len(got) != len(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] || got[i].n < 0 {
					t.Fatalf("got %v, want %v", got, c.want)
				}
			}
		})
	}
}

func TestChartQuantile(t *testing.T) {
	for _, c := range []struct {
		name string
		q    float64
		bs   []bucket
		want float64
		ok   bool
	}{
		{"empty", 0.5, []bucket{{1, 0}, {inf, 0}}, 0, false},
		{"no buckets", 0.5, nil, 0, false},
		// 10 runs ≤ 1 s: the median is half way through the first bucket.
		{"first bucket interpolated from 0", 0.5, []bucket{{1, 10}, {2, 10}, {inf, 10}}, 0.5, true},
		// 4 runs ≤ 1 s, 6 in (1, 3]: rank 5 is the first of the 6.
		{"second bucket interpolated", 0.5, []bucket{{1, 4}, {3, 10}, {inf, 10}}, 1 + 2*(1.0/6), true},
		{"p95 in the second bucket", 0.95, []bucket{{1, 4}, {3, 10}, {inf, 10}}, 1 + 2*(5.5/6), true},
		{"empty buckets are skipped", 0.5, []bucket{{0.1, 0}, {1, 0}, {5, 2}, {inf, 2}}, 3, true},
		{"in +Inf: the highest finite bound", 0.95, []bucket{{1, 1}, {5, 1}, {inf, 10}}, 5, true},
		{"all in +Inf with no finite bound", 0.5, []bucket{{inf, 3}}, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := quantile(c.q, c.bs)
			if ok != c.ok || math.Abs(got-c.want) > 1e-9 {
				t.Fatalf("quantile(%v, %v) = %v, %v; want %v, %v", c.q, c.bs, got, ok, c.want, c.ok)
			}
		})
	}
}

// snap is a read of an agent: runs by outcome, durations, gauges.
func snap(at time.Time, runs map[string]float64, bs []bucket, cpu, mem float64) chartSnapshot {
	return chartSnapshot{at: at, ok: true, runs: runs, buckets: bs, pending: ptr(2), running: ptr(1), cpu: cpu, hasCPU: true, mem: mem, hasMem: true}
}

func TestChartPoint(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(10 * time.Second)
	prev := snap(t0, map[string]float64{"success": 5, "error": 1}, []bucket{{1, 6}, {inf, 6}}, 10, 100)
	for _, c := range []struct {
		name             string
		prev             *chartSnapshot
		cur              chartSnapshot
		runs             map[string]float64 // nil: no runs known
		p50, cpu, memory *float64
	}{
		{"first read is the baseline", nil, snap(t1, map[string]float64{"success": 9}, []bucket{{1, 9}, {inf, 9}}, 12, 200),
			nil, nil, nil, ptr(200)},
		{"deltas over the interval", &prev, snap(t1, map[string]float64{"success": 8, "error": 1}, []bucket{{1, 8}, {inf, 9}}, 15, 300),
			map[string]float64{"success": 3, "error": 0, "timeout": 0, "cancelled": 0, "interrupted": 0}, ptr(0.75), ptr(0.5), ptr(300)},
		// success went down: every counter restarted, error too though
		// it reads more than before.
		{"agent restarted: counted since, never negative", &prev, snap(t1, map[string]float64{"error": 2}, []bucket{{1, 2}, {inf, 2}}, 1, 50),
			map[string]float64{"success": 0, "error": 2, "timeout": 0, "cancelled": 0, "interrupted": 0}, ptr(0.5), ptr(0.1), ptr(50)},
		{"agent not read: no runs, memory still", &prev, chartSnapshot{at: t1, mem: 70, hasMem: true}, nil, nil, nil, ptr(70)},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, _ := chartPoint(c.prev, c.cur)
			if (p.Runs == nil) != (c.runs == nil) || len(p.Runs) != len(c.runs) {
				t.Fatalf("runs %v, want %v", p.Runs, c.runs)
			}
			for o, v := range c.runs {
				if p.Runs[o] != v || p.Runs[o] < 0 {
					t.Fatalf("runs %v, want %v", p.Runs, c.runs)
				}
			}
			for _, f := range []struct {
				name      string
				got, want *float64
			}{{"p50", p.P50, c.p50}, {"cpu", p.CPU, c.cpu}, {"memory", p.Memory, c.memory}} {
				if (f.got == nil) != (f.want == nil) || f.got != nil && math.Abs(*f.got-*f.want) > 1e-9 {
					t.Errorf("%s = %v, want %v", f.name, show(f.got), show(f.want))
				}
			}
		})
	}
}

func show(v *float64) any {
	if v == nil {
		return nil
	}
	return *v
}

// TestChartDownsampling: the 24-hour window folds the reads of each 5
// minutes into one point — runs added up, durations' quantiles from the
// summed buckets, gauges averaged, CPU weighted by time — and both rings
// keep a bounded number of points.
func TestChartDownsampling(t *testing.T) {
	const interval = 10 * time.Second
	c := newCharts(interval, nil, nil)
	d := newDepChart(interval)
	c.deps["dep"] = d
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// 1 success a read, 1 s long, then from minute 5 one error a read,
	// 10 s long; memory climbs by 10 a read; CPU: 0.5 cores.
	var success, errs, count1, count10, cpu float64
	reads := 25 * 60 * 60 / 10 // 25 hours: both rings wrap
	for i := range reads {
		at := start.Add(time.Duration(i) * interval)
		if i > 0 {
			if at.Sub(start) < 5*time.Minute {
				success++
				count1++
			} else {
				errs++
				count10++
			}
			cpu += 5
		}
		d.record(snap(at, map[string]float64{"success": success, "error": errs},
			[]bucket{{1, count1}, {10, count1 + count10}, {inf, count1 + count10}}, cpu, float64(10*i)))
	}
	now := start.Add(time.Duration(reads-1) * interval)
	hour := c.series("dep", "1h", now)
	if len(hour.Points) != 360 || len(d.fine.buf) != 360 {
		t.Fatalf("1h: %d points (ring %d), want 360", len(hour.Points), len(d.fine.buf))
	}
	if hour.Totals["error"] != 360 || hour.Totals["success"] != 0 {
		t.Errorf("1h totals %v, want 360 errors", hour.Totals)
	}
	day := c.series("dep", "24h", now)
	if len(d.day.buf) != 288 || len(day.Points) != 288 {
		t.Fatalf("24h: %d points (ring %d), want 288", len(day.Points), len(d.day.buf))
	}
	for i, p := range day.Points {
		if i > 0 && !p.Time.After(day.Points[i-1].Time) {
			t.Fatalf("24h points not in time order at %d: %v, %v", i, day.Points[i-1].Time, p.Time)
		}
	}
	// A whole bucket in the middle: 30 reads.
	p := day.Points[100]
	if p.Runs["error"] != 30 || p.Runs["success"] != 0 || p.Seconds != 300 {
		t.Errorf("a 5-minute point: runs %v over %v s, want 30 errors over 300 s", p.Runs, p.Seconds)
	}
	if p.P50 == nil || *p.P50 != 5.5 || p.P95 == nil || math.Abs(*p.P95-(1+9*0.95)) > 1e-9 {
		t.Errorf("a 5-minute point: p50 %v p95 %v, want 5.5 and 9.55 (all in (1, 10])", show(p.P50), show(p.P95))
	}
	if p.CPU == nil || math.Abs(*p.CPU-0.5) > 1e-9 {
		t.Errorf("a 5-minute point: cpu %v, want 0.5 cores", show(p.CPU))
	}
	if p.Memory == nil || p.Pending == nil || *p.Pending != 2 {
		t.Errorf("a 5-minute point: memory %v pending %v", show(p.Memory), show(p.Pending))
	}
	// Its memory is the mean of its 30 reads'.
	first := p.Time.Add(-29 * interval)
	if want := 10 * (float64(first.Sub(start)/interval) + 14.5); *p.Memory != want {
		t.Errorf("a 5-minute point's memory %v, want the mean %v", *p.Memory, want)
	}
	// The last point is the bucket still filling, up to now.
	if last := day.Points[len(day.Points)-1]; !last.Time.Equal(now) {
		t.Errorf("the open bucket ends at %v, want %v", last.Time, now)
	}
}

// TestChartSampling: the sampler splits the relay's families by
// deployment, keeps a ring for each, and drops a deleted deployment's.
func TestChartSampling(t *testing.T) {
	gauge := func(name, dep string, v float64) *dto.MetricFamily {
		return &dto.MetricFamily{Name: proto.String(name), Type: dto.MetricType_GAUGE.Enum(),
			Metric: []*dto.Metric{{Label: []*dto.LabelPair{depLabel(dep)}, Gauge: &dto.Gauge{Value: proto.Float64(v)}}}}
	}
	runs := func(dep string, success float64) *dto.MetricFamily {
		return &dto.MetricFamily{Name: proto.String(famRuns), Type: dto.MetricType_COUNTER.Enum(),
			Metric: []*dto.Metric{{Label: []*dto.LabelPair{depLabel(dep), {Name: proto.String("outcome"), Value: proto.String("success")}},
				Counter: &dto.Counter{Value: proto.Float64(success)}}}}
	}
	hist := func(dep string, n uint64) *dto.MetricFamily {
		return &dto.MetricFamily{Name: proto.String(famDuration), Type: dto.MetricType_HISTOGRAM.Enum(),
			Metric: []*dto.Metric{{Label: []*dto.LabelPair{depLabel(dep), {Name: proto.String("outcome"), Value: proto.String("success")}},
				Histogram: &dto.Histogram{SampleCount: proto.Uint64(n), Bucket: []*dto.Bucket{
					{UpperBound: proto.Float64(0.1), CumulativeCount: proto.Uint64(0)},
					{UpperBound: proto.Float64(1), CumulativeCount: proto.Uint64(n)}}}}}}
	}
	var fams []*dto.MetricFamily
	exists := map[string]bool{"a": true, "b": true}
	c := newCharts(time.Second, func() ([]*dto.MetricFamily, error) { return fams, nil }, func(d string) bool { return exists[d] })
	t0 := time.Now()
	fams = []*dto.MetricFamily{gauge(metricScrapeUp, "a", 1), gauge(metricScrapeUp, "b", 0), runs("a", 2), hist("a", 2), gauge(famPending, "a", 3)}
	c.sample(t0)
	fams = []*dto.MetricFamily{gauge(metricScrapeUp, "a", 1), gauge(metricScrapeUp, "b", 0), runs("a", 7), hist("a", 7), gauge(famPending, "a", 1)}
	c.sample(t0.Add(time.Second))
	a := c.series("a", "1h", t0.Add(time.Second))
	if len(a.Points) != 2 || a.Totals["success"] != 5 || a.Points[1].Runs["success"] != 5 || *a.Points[1].Pending != 1 {
		t.Fatalf("deployment a: %+v", a)
	}
	if p50 := a.Points[1].P50; p50 == nil || math.Abs(*p50-0.55) > 1e-9 {
		t.Errorf("deployment a's p50 %v, want 0.55 (5 runs in (0.1, 1])", show(p50))
	}
	if b := c.series("b", "1h", t0.Add(time.Second)); len(b.Points) != 2 || b.Points[1].Runs != nil {
		t.Errorf("deployment b, never read: %+v", b)
	}
	// b deleted: not relayed any more, its ring goes; a stops serving but
	// exists: a gap.
	delete(exists, "b")
	fams = nil
	c.sample(t0.Add(2 * time.Second))
	if _, ok := c.deps["b"]; ok {
		t.Error("a deleted deployment's ring is kept")
	}
	if a := c.series("a", "1h", t0.Add(2*time.Second)); len(a.Points) != 3 || a.Points[2].Runs != nil {
		t.Errorf("deployment a not serving: %+v", a.Points)
	}
	if got := c.series("nope", "24h", t0); len(got.Points) != 0 || got.Step != 300 {
		t.Errorf("an unknown deployment: %+v", got)
	}
}

// TestChartTicker: started, the sampler reads the agents every interval
// by itself, and stops with its context.
func TestChartTicker(t *testing.T) {
	reads := make(chan struct{}, 16)
	c := newCharts(time.Second, func() ([]*dto.MetricFamily, error) {
		reads <- struct{}{}
		return nil, nil
	}, func(string) bool { return false })
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	c.Start(ctx)
	for range 2 {
		select {
		case <-reads:
		case <-time.After(5 * time.Second):
			t.Fatal("the sampler did not read the agents every second")
		}
	}
	if took := time.Since(start); took < 1900*time.Millisecond {
		t.Errorf("two reads in %v: faster than the interval", took)
	}
	cancel()
	c.Wait()
}
