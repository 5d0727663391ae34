package runtime

import (
	"context"
	"sync"
)

// Gate holds new requests to a deployment while its revision is handed
// over: a deployment's agent database is a single file that only one agent
// process can hold, so the old process stops before the new one starts,
// and requests arriving meanwhile wait instead of failing.
type Gate struct {
	mu     sync.Mutex
	paused map[string]chan struct{} // deployment → closed when resumed
}

// Pause holds new requests to dep until the returned resume is called.
func (g *Gate) Pause(dep string) (resume func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused == nil {
		g.paused = map[string]chan struct{}{}
	}
	ch := make(chan struct{})
	g.paused[dep] = ch
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
	for {
		g.mu.Lock()
		ch := g.paused[dep]
		g.mu.Unlock()
		if ch == nil {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
