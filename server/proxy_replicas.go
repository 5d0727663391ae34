package server

import (
	"sync"
	"sync/atomic"

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
// replicas in turn, or the driver's one endpoint.
func (p *proxy) endpoint(dep string) (string, bool) {
	if b, ok := p.driver.(runtime.Balancer); ok {
		if eps := b.Endpoints(dep); len(eps) > 1 {
			return eps[p.turns.next(dep)%uint64(len(eps))], true
		} else if len(eps) == 1 {
			return eps[0], true
		}
	}
	return p.driver.Endpoint(dep)
}
