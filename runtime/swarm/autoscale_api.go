package swarm

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"
)

// Autoscaling of the API replicas (max_scale above min_scale). Their load
// is the requests they serve: every AutoscaleInterval the autoscaler reads
// lg_api_http_requests_total (every API request, whatever its status; not
// /ok, /metrics and the docs) from each API task and takes the rate over
// the interval. The target is APIRequestsPerReplica requests a second per
// replica (DefaultAPIRequestsPerReplica unless configured):
//
//   - up when the rate needs more replicas than run at the target: to
//     ceil(rate / target), at most max_scale;
//   - down by one when one replica fewer would still run under half the
//     target, and has for ScaleDownAfter (and again after as long once
//     more), at least min_scale.
//
// A request counts when it ends (a stream when it closes), so a stream
// open for minutes weighs as one request; request rate is what the
// agents measure the same way on every node, where CPU would need each
// node's engine.

// DefaultAPIRequestsPerReplica is the request rate one API replica is
// meant to serve before the autoscaler adds another.
const DefaultAPIRequestsPerReplica = 100.0

// apiPolicy decides the API replicas' count from their request rate.
type apiPolicy struct {
	min, max  int
	target    float64 // requests a second per replica
	downAfter time.Duration
	lowSince  time.Time // since when one replica fewer would do; zero: it would not

	mu     sync.Mutex
	counts map[string]float64 // each task's request count at the last read (by its URL)
	at     time.Time
}

// decide returns the count to set (current when nothing changes) and why.
func (p *apiPolicy) decide(now time.Time, current int, rate float64) (int, string) {
	need := int(math.Ceil(rate / p.target))
	if need > current && current < p.max {
		p.lowSince = time.Time{}
		return min(p.max, need), fmt.Sprintf("%.1f requests/s over %d API replicas (target %g per replica)", rate, current, p.target)
	}
	if current <= p.min || rate > p.target*float64(current-1)/2 {
		p.lowSince = time.Time{}
		return current, ""
	}
	if p.lowSince.IsZero() {
		p.lowSince = now
		return current, ""
	}
	if now.Sub(p.lowSince) < p.downAfter {
		return current, ""
	}
	p.lowSince = now // the next step down waits as long again
	return current - 1, fmt.Sprintf("%.1f requests/s for %v: %d replicas would run under half the target %g", rate, p.downAfter.Round(time.Second), current-1, p.target)
}

// observe takes the request counts read from the API tasks now (by URL)
// and returns the rate since the last read: the increase of the tasks
// read both times, over the time between. A task seen for the first time
// adds nothing yet (its count started before); one that went is left
// out. ok is false on the first read.
func (p *apiPolicy) observe(now time.Time, counts map[string]float64) (rate float64, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var inc float64
	for url, c := range counts {
		if prev, seen := p.counts[url]; seen && c >= prev {
			inc += c - prev
		}
	}
	elapsed := now.Sub(p.at).Seconds()
	ok = p.counts != nil && elapsed > 0
	p.counts, p.at = counts, now
	if !ok {
		return 0, false
	}
	return inc / elapsed, true
}

// requestRate reads the request counts of dep's API tasks and returns
// their rate since the last call (ok false on the first, or when no task
// answered).
func (d *Driver) requestRate(ctx context.Context, dep string, p *apiPolicy, now time.Time) (float64, bool) {
	counts := map[string]float64{}
	for _, ep := range d.Endpoints(dep) {
		c, err := scrapeSum(ctx, ep, "lg_api_http_requests_total")
		if err != nil {
			// Left out: observe counts it again from its next read.
			d.Log.Debug().Err(err).Str("deployment_id", dep).Msg("autoscale: an API replica's request count is unknown")
			continue
		}
		counts[ep] = c
	}
	if len(counts) == 0 {
		return 0, false
	}
	return p.observe(now, counts)
}

func (d *Driver) apiTarget() float64 {
	if d.APIRequestsPerReplica > 0 {
		return d.APIRequestsPerReplica
	}
	return DefaultAPIRequestsPerReplica
}
