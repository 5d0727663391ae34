package runtime

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"
)

// fakeClock is the watcher's time in tests.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

type watchHarness struct {
	w        *Watcher
	clock    *fakeClock
	down     bool // the agent's state as the check sees it
	busy     bool
	rev      string
	checks   int
	attempts []time.Duration // when (since the start) each recreation began
	changes  []string
	start    time.Time
}

func newHarness() *watchHarness {
	h := &watchHarness{clock: &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, rev: "r1"}
	h.start = h.clock.t
	h.w = &Watcher{Interval: 5 * time.Second, Retry: time.Second, Grace: 2 * time.Second,
		MinBackoff: 2 * time.Second, MaxBackoff: 16 * time.Second, ResetAfter: time.Minute, Now: h.clock.now,
		Targets: func() []Target { return []Target{{Deployment: "d", Revision: h.rev, Busy: h.busy}} },
		Check: func(context.Context, string, string) error {
			h.checks++
			if h.down {
				return errors.New("gone")
			}
			return nil
		},
		Recover: func(dep, rev string, attempt int, reason string) bool {
			h.attempts = append(h.attempts, h.clock.t.Sub(h.start))
			return true
		},
		Changed: func(dep, rev string, hl Health) {
			h.changes = append(h.changes, hl.Status+"@"+hl.Since.Sub(h.start).String())
		},
	}
	return h
}

// run steps the watcher once a second for d.
func (h *watchHarness) run(d time.Duration) {
	for end := h.clock.t.Add(d); h.clock.t.Before(end); h.clock.advance(time.Second) {
		h.w.Step(context.Background())
	}
}

func TestWatcherRecreatesWithBackoff(t *testing.T) {
	h := newHarness()
	h.run(3 * time.Second)
	if !reflect.DeepEqual(h.changes, []string{"healthy@0s"}) || h.checks != 1 {
		t.Fatalf("healthy start: changes %v, checks %d (want one check per Interval)", h.changes, h.checks)
	}
	// Lost at 3 s: noticed at the next check (5 s) or at once when poked.
	h.down = true
	h.w.Poke("d")
	h.run(40 * time.Second)
	want := []time.Duration{5, 7, 11, 19, 35} // grace 2 s, then 2, 4, 8, 16 s (the cap)
	for i := range want {
		want[i] *= time.Second
	}
	if !reflect.DeepEqual(h.attempts, want) {
		t.Fatalf("recreations at %v, want %v", h.attempts, want)
	}
	if !reflect.DeepEqual(h.changes, []string{"healthy@0s", "unhealthy@3s"}) {
		t.Fatalf("changes %v", h.changes)
	}
	if hl, _ := h.w.Health("d"); hl.Attempts != 5 || hl.Reason != "gone" {
		t.Fatalf("health %+v", hl)
	}
	// Back at 43 s; lost again soon after: the back-off is not forgiven.
	h.down = false
	h.run(5 * time.Second)
	h.down = true
	h.attempts = nil
	h.w.Poke("d")
	h.run(20 * time.Second)
	if len(h.attempts) != 1 || h.attempts[0] != 48*time.Second+16*time.Second {
		t.Fatalf("a storm right after recovery: recreations at %v, want one after the capped back-off", h.attempts)
	}
	// Healthy for a minute forgives: the next loss waits only the grace.
	h.down = false
	h.run(70 * time.Second)
	h.down = true
	h.attempts = nil
	lostAt := h.clock.t.Sub(h.start)
	h.w.Poke("d")
	h.run(3 * time.Second)
	if len(h.attempts) != 1 || h.attempts[0] != lostAt+2*time.Second {
		t.Fatalf("after a healthy minute: recreations at %v, want %v", h.attempts, lostAt+2*time.Second)
	}
}

func TestWatcherLeavesBusyDeploymentsAlone(t *testing.T) {
	h := newHarness()
	h.down, h.busy = true, true
	h.run(30 * time.Second)
	if h.checks != 0 || len(h.attempts) != 0 || len(h.changes) != 0 {
		t.Fatalf("busy deployment: %d checks, recreations %v, changes %v", h.checks, h.attempts, h.changes)
	}
	// A new active revision starts a new history; a refused recreation
	// (other work took the deployment) is tried again on the next check.
	h.busy, h.rev = false, "r2"
	refused := 0
	h.w.Recover = func(string, string, int, string) bool { refused++; return false }
	h.run(5 * time.Second)
	if refused < 2 || !reflect.DeepEqual(h.changes, []string{"unhealthy@30s"}) {
		t.Fatalf("refused recreations %d, changes %v", refused, h.changes)
	}
}
