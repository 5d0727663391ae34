package server

import (
	"sync"
	"sync/atomic"
	"time"

	"slipway/runtime"
)

// A scaled deployment is served by several API replicas
// (runtime.Balancer): the proxy takes them in turn, per deployment, among
// those whose health checks pass now, so a replica that fails its check
// (or whose process exited) gets no requests until it answers again, and
// queue workers, never listed, get none at all. A request whose replica
// is not reached (a refused dial: it died just now) is held and sent to
// another one (proxy_hold.go). No stickiness: the replicas share threads,
// runs and stream events through PostgreSQL and Redis.

// replicaTurns counts each deployment's requests, for the round robin.
type replicaTurns struct{ m sync.Map } // deployment id → *atomic.Uint64

func (t *replicaTurns) next(dep string) uint64 {
	c, ok := t.m.Load(dep)
	if !ok {
		c, _ = t.m.LoadOrStore(dep, new(atomic.Uint64))
	}
	return c.(*atomic.Uint64).Add(1) - 1
}

// endpoint is where the next request for dep goes: one of its healthy API
// replicas in turn, or the driver's one endpoint. Replicas a dial failed
// to reach within unreachableFor are passed over while another is left.
func (p *proxy) endpoint(dep string) (string, bool) {
	if b, ok := p.driver.(runtime.Balancer); ok {
		eps := b.Endpoints(dep)
		if len(eps) > 1 {
			reachable := make([]string, 0, len(eps))
			for _, ep := range eps {
				if u, _, err := agentURL(ep); err != nil || !p.unreachable.recent(u.Host) {
					reachable = append(reachable, ep)
				}
			}
			if len(reachable) > 0 {
				eps = reachable
			}
		}
		if len(eps) > 1 {
			return eps[p.turns.next(dep)%uint64(len(eps))], true
		} else if len(eps) == 1 {
			return eps[0], true
		}
	}
	return p.driver.Endpoint(dep)
}

// unreachableFor is how long a replica a dial failed to reach is passed
// over. The balancer's list follows health checks, but a node that went
// away answers nothing (a dial to it fails only after the kernel gives up
// on the address, seconds later) until the list drops it; a request held
// for its agent (proxy_hold.go) must not be sent there again meanwhile.
const unreachableFor = 10 * time.Second

// dialFailures remembers when a dial to each host:port last failed.
type dialFailures struct{ m sync.Map } // host:port → time.Time

func (f *dialFailures) mark(host string) { f.m.Store(host, time.Now()) }

// recent reports a dial failure to host within unreachableFor; older
// ones are forgotten.
func (f *dialFailures) recent(host string) bool {
	v, ok := f.m.Load(host)
	if !ok {
		return false
	}
	if time.Since(v.(time.Time)) < unreachableFor {
		return true
	}
	f.m.CompareAndDelete(host, v)
	return false
}
