package hosts

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"
)

// Pool is one language's host processes, alike: each loads the same
// graphs and is supervised as a Host. A Python or Node process runs
// graphs on one core, so an agent that may use more cores runs more
// processes, as an ASGI server runs a worker per core. The graphs keep no
// state in a process (checkpoints, store items and runs are the engine's),
// so any member may run any run; only a run's cancel must reach the
// member that runs it, which is why runs go through Pick.
type Pool struct {
	mu      sync.Mutex
	members []*Member
}

// Member is one process of a pool, counting the calls it has in flight.
type Member struct {
	*Host
	calls atomic.Int64
}

// Call is Host.Call, counted while it is in flight.
func (m *Member) Call(ctx context.Context, method string, params, out any) error {
	m.calls.Add(1)
	defer m.calls.Add(-1)
	return m.Host.Call(ctx, method, params, out)
}

// StartPool starts the first process and waits until it is ready, as
// Start does; the agent serves with it. The other n-1 start after it, one
// at a time (so they do not slow its start), and join the pool when
// ready. One that fails to start is logged and left out: the pool still
// serves, with fewer processes.
func StartPool(ctx context.Context, spec Spec, n int, h Handler, log zerolog.Logger) (*Pool, Ready, error) {
	first, ready, err := Start(ctx, spec, h, log)
	if err != nil {
		return nil, ready, err
	}
	p := &Pool{members: []*Member{{Host: first}}}
	if n > 1 {
		go func() {
			for i := 1; i < n; i++ {
				more, _, err := Start(ctx, spec, h, log.With().Int("process", i+1).Logger())
				if err != nil {
					log.Warn().Err(err).Int("process", i+1).Msgf("extra %s host process did not start; serving with %d", spec.Language, i)
					return
				}
				p.mu.Lock()
				p.members = append(p.members, &Member{Host: more})
				p.mu.Unlock()
				log.Info().Int("process", i+1).Msgf("%s host process joined", spec.Language)
			}
		}()
	}
	return p, ready, nil
}

// Pick is the member a call should go to: the one with the fewest calls
// in flight among those whose process is up (the first when none is).
func (p *Pool) Pick() *Member {
	p.mu.Lock()
	defer p.mu.Unlock()
	var best *Member
	for _, m := range p.members {
		if !m.isUp() {
			continue
		}
		if best == nil || m.calls.Load() < best.calls.Load() {
			best = m
		}
	}
	if best == nil {
		best = p.members[0]
	}
	return best
}

// First is the pool's first process. The custom routes' app is served
// there only: an app may keep state in memory between requests (an
// upload's progress, a cache) that its other requests must see, as they
// would under the reference server's single process.
func (p *Pool) First() *Member {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.members[0]
}

// Call sends a request to the least busy member.
func (p *Pool) Call(ctx context.Context, method string, params, out any) error {
	return p.Pick().Call(ctx, method, params, out)
}

// Size is how many processes have joined the pool.
func (p *Pool) Size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.members)
}

// Restarts is how many times the pool's processes died and were started again.
func (p *Pool) Restarts() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for _, m := range p.members {
		n += m.Restarts()
	}
	return n
}
