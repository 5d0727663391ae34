package runtime

import (
	"context"
	"sync"
	"time"
)

// Gate holds new requests to a deployment while its revision is handed
// over: a deployment's agent database is a single file that only one agent
// process can hold, so the old process stops before the new one starts,
// and requests arriving meanwhile wait instead of failing.
//
// Every Pause starts a new handover epoch. A request remembers the epoch
// it passed the gate in (Pass); Handover then tells whether the agent it
// was sent to has been handed over since, and when that began: the proxy
// uses it to tell a connection the old agent closed as idle while
// stopping from a request the agent was handling (see server/proxy_hold.go).
type Gate struct {
	mu     sync.Mutex
	paused map[string]chan struct{} // deployment → closed when resumed
	epochs map[string]epoch         // deployment → its last handover
}

type epoch struct {
	n     uint64
	since time.Time // when handover n began
}

// Pause holds new requests to dep until the returned resume is called.
func (g *Gate) Pause(dep string) (resume func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused == nil {
		g.paused = map[string]chan struct{}{}
		g.epochs = map[string]epoch{}
	}
	ch := make(chan struct{})
	g.paused[dep] = ch
	g.epochs[dep] = epoch{n: g.epochs[dep].n + 1, since: time.Now()}
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			if g.paused[dep] == ch {
				delete(g.paused, dep)
			}
			g.mu.Unlock()
			close(ch)
		})
	}
}

// Wait returns once dep is not paused, or when ctx ends.
func (g *Gate) Wait(ctx context.Context, dep string) error {
	_, err := g.Pass(ctx, dep)
	return err
}

// Pass is Wait that also returns the handover epoch dep was in when the
// gate let the caller through.
func (g *Gate) Pass(ctx context.Context, dep string) (uint64, error) {
	for {
		g.mu.Lock()
		ch, n := g.paused[dep], g.epochs[dep].n
		g.mu.Unlock()
		if ch == nil {
			return n, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// Handover reports whether dep has been handed over (paused) since epoch
// passed, and when the latest handover began.
func (g *Gate) Handover(dep string, passed uint64) (since time.Time, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.epochs[dep]
	return e.since, e.n > passed
}
