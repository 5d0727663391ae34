package swarm

import (
	"testing"
	"time"
)

// TestScalePolicy: the queue workers scale up at once when at least one
// run per worker is pending (in proportion, at most max), and down one at
// a time only after no run has been pending for downAfter (hysteresis),
// never below min.
func TestScalePolicy(t *testing.T) {
	type step struct {
		at               time.Duration
		current, pending int
		want             int
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"burst scales up in proportion, capped", []step{{0, 1, 1, 2}, {5 * time.Second, 2, 10, 4}}},
		{"fewer pending than workers: no change", []step{{0, 3, 2, 3}, {5 * time.Second, 3, 1, 3}}},
		{"at max: no change", []step{{0, 4, 40, 4}}},
		{"idle: down one step per downAfter, not below min", []step{
			{0, 4, 0, 4}, {20 * time.Second, 4, 0, 4}, {30 * time.Second, 4, 0, 3},
			{40 * time.Second, 3, 0, 3}, {60 * time.Second, 3, 0, 2}, {90 * time.Second, 2, 0, 1},
			{200 * time.Second, 1, 0, 1}}},
		{"a pending run restarts the idle clock", []step{
			{0, 3, 0, 3}, {25 * time.Second, 3, 1, 3}, {30 * time.Second, 3, 0, 3}, {55 * time.Second, 3, 0, 3}, {60 * time.Second, 3, 0, 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &scalePolicy{min: 1, max: 4, downAfter: 30 * time.Second}
			t0 := time.Unix(1e9, 0)
			for i, s := range tc.steps {
				got, why := p.decide(t0.Add(s.at), s.current, s.pending)
				if got != s.want {
					t.Fatalf("step %d (%v, %d workers, %d pending): %d, want %d", i, s.at, s.current, s.pending, got, s.want)
				}
				if (got != s.current) != (why != "") {
					t.Fatalf("step %d: a decision %d -> %d with reason %q", i, s.current, got, why)
				}
			}
		})
	}
}
