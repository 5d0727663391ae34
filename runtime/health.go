package runtime

import (
	"context"
	"sync"
	"time"
)

// HealthChecker is implemented by drivers that can tell whether a
// deployment's active revision is being served: its agent runs and
// answers GET /ok.
type HealthChecker interface {
	// CheckHealth returns nil when revision rev serves dep, or why not.
	CheckHealth(ctx context.Context, dep, rev string) error
}

// HealthNotifier is implemented by drivers that learn of a lost agent
// without polling (Docker events, a child process's exit): lost is called
// with the deployment, and the watcher checks it at once.
type HealthNotifier interface {
	WatchHealth(ctx context.Context, lost func(dep string))
}

// Health is what the watcher knows of a deployment's serving agent.
type Health struct {
	Status string    `json:"status"` // HealthHealthy or HealthUnhealthy
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since"`
	// Attempts counts the agent's recreations since it went down.
	Attempts int `json:"restart_attempts,omitempty"`
	// Checks counts the health checks (GET /ok) of the active revision's
	// agent since this control plane started watching it: the agent's log
	// leaves them out.
	Checks int64 `json:"checks"`
}

const (
	HealthHealthy   = "healthy"
	HealthUnhealthy = "unhealthy"
)

// Target is a deployment the watcher looks after: its active revision,
// and whether other work (a rollout, a restore) holds it now, in which
// case it is neither checked nor recreated.
type Target struct {
	Deployment, Revision string
	Busy                 bool
}

// Watcher checks each deployment's active revision, recreates an agent
// that is lost, and reports every change of health. Recreations of one
// deployment back off exponentially up to MaxBackoff; the back-off resets
// once the agent has been healthy for ResetAfter.
//
// Step does one round at the time Now gives, so tests drive it with a
// fake clock; Run calls it on a ticker and whenever Poke names a
// deployment.
type Watcher struct {
	// Interval between checks of a healthy deployment; Retry between
	// checks of an unhealthy one.
	Interval, Retry time.Duration
	// Grace is how long a lost agent may take to come back on its own
	// (a restart policy, a supervisor) before it is recreated.
	Grace time.Duration
	// MinBackoff and MaxBackoff bound the wait between recreations.
	MinBackoff, MaxBackoff time.Duration
	// ResetAfter is the healthy period that forgives earlier failures.
	ResetAfter time.Duration
	Now        func() time.Time

	Targets func() []Target
	Check   func(ctx context.Context, dep, rev string) error
	// Recover starts recreating dep's agent from revision rev (attempt
	// counts from 1) and reports whether it did; false when other work
	// holds the deployment.
	Recover func(dep, rev string, attempt int, reason string) bool
	// Changed is told each change of a deployment's health.
	Changed func(dep, rev string, h Health)

	mu     sync.Mutex
	state  map[string]*watched
	poked  map[string]bool
	wake   chan struct{}
	initMu sync.Once
}

type watched struct {
	rev         string
	health      Health
	known       bool // a first check has set health
	nextCheck   time.Time
	nextAttempt time.Time
	backoff     time.Duration // the wait after the next recreation; 0: none failed lately
	checks      int64         // GET /ok probes sent to this revision's agent
}

func (w *Watcher) init() {
	w.initMu.Do(func() {
		w.state = map[string]*watched{}
		w.poked = map[string]bool{}
		w.wake = make(chan struct{}, 1)
	})
}

func (w *Watcher) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

// Poke has dep checked in the next round, which starts at once.
func (w *Watcher) Poke(dep string) {
	w.init()
	w.mu.Lock()
	w.poked[dep] = true
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Health is the last known health of dep's agent.
func (w *Watcher) Health(dep string) (Health, bool) {
	w.init()
	w.mu.Lock()
	defer w.mu.Unlock()
	st, ok := w.state[dep]
	if !ok || !st.known {
		return Health{}, false
	}
	return st.health, true
}

// Checks is how many health checks dep's active revision's agent was
// sent since it became active (or this watcher started).
func (w *Watcher) Checks(dep string) int64 {
	w.init()
	w.mu.Lock()
	defer w.mu.Unlock()
	if st, ok := w.state[dep]; ok {
		return st.checks
	}
	return 0
}

// Run steps until ctx ends: every Retry (the finer of the two intervals)
// and whenever a deployment is poked.
func (w *Watcher) Run(ctx context.Context) {
	w.init()
	t := time.NewTicker(w.Retry)
	defer t.Stop()
	for {
		w.Step(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-w.wake:
		}
	}
}

// Step checks every target that is due (or poked) once, and starts the
// recreations that are due.
func (w *Watcher) Step(ctx context.Context) {
	w.init()
	targets := w.Targets()
	seen := make(map[string]bool, len(targets))
	for _, tg := range targets {
		seen[tg.Deployment] = true
		w.mu.Lock()
		st := w.state[tg.Deployment]
		if st == nil || st.rev != tg.Revision {
			// A new deployment, or a new active revision: its own history.
			st = &watched{rev: tg.Revision}
			w.state[tg.Deployment] = st
		}
		poked := w.poked[tg.Deployment]
		now := w.now()
		due := poked || !now.Before(st.nextCheck)
		if tg.Busy || !due {
			w.mu.Unlock()
			continue
		}
		delete(w.poked, tg.Deployment)
		w.mu.Unlock()

		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := w.Check(cctx, tg.Deployment, tg.Revision)
		cancel()
		if ctx.Err() != nil {
			return
		}
		w.observe(tg, st, err)
	}
	w.mu.Lock()
	for dep := range w.state {
		if !seen[dep] {
			delete(w.state, dep)
			delete(w.poked, dep)
		}
	}
	w.mu.Unlock()
}

// observe applies one check's result to a deployment's state.
func (w *Watcher) observe(tg Target, st *watched, err error) {
	now := w.now()
	var changed *Health
	var attempt int
	var reason string
	w.mu.Lock()
	st.checks++
	switch {
	case err == nil:
		if !st.known || st.health.Status != HealthHealthy {
			st.health = Health{Status: HealthHealthy, Since: now}
			h := st.health
			changed = &h
		} else if now.Sub(st.health.Since) >= w.ResetAfter {
			st.backoff = 0
		}
		st.known = true
		st.nextCheck = now.Add(w.Interval)
	default:
		if !st.known || st.health.Status != HealthUnhealthy {
			st.health = Health{Status: HealthUnhealthy, Reason: err.Error(), Since: now}
			h := st.health
			changed = &h
			wait := w.Grace
			if st.backoff > wait {
				wait = st.backoff // it failed again soon after the last recreation
			}
			st.nextAttempt = now.Add(wait)
		}
		st.known = true
		st.nextCheck = now.Add(w.Retry)
		if !now.Before(st.nextAttempt) {
			attempt, reason = st.health.Attempts+1, st.health.Reason
		}
	}
	w.mu.Unlock()
	if changed != nil && w.Changed != nil {
		w.Changed(tg.Deployment, tg.Revision, *changed)
	}
	if attempt == 0 || !w.Recover(tg.Deployment, tg.Revision, attempt, reason) {
		return
	}
	w.mu.Lock()
	switch {
	case st.backoff == 0:
		st.backoff = w.MinBackoff
	case st.backoff < w.MaxBackoff:
		st.backoff = min(2*st.backoff, w.MaxBackoff)
	}
	st.health.Attempts = attempt
	st.nextAttempt = now.Add(st.backoff)
	w.mu.Unlock()
}
