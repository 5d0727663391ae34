package process

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"slipway/runtime"
)

// TestScaledRevision: a scaled revision runs its API replicas and queue
// workers as agents of their own (each holding its own data directory's
// lock, as the stand-in agent does); Endpoints lists the API replicas
// only; a killed API replica leaves the list at once while the revision
// stays healthy through the other, and rejoins once restarted; with no
// API replica left the revision is unhealthy; Stop ends every agent.
func TestScaledRevision(t *testing.T) {
	d := newDriver(t)
	s := spec(t, "rev1", `{"name":"scaled"}`, nil)
	s.Scale = runtime.Scale{API: 2, Queue: 1}
	if _, err := deploy(t, d, s); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d.mu.Lock()
	g := d.deps["dep1"]
	d.mu.Unlock()
	var names []string
	for _, c := range g.members {
		names = append(names, c.replica.Name+"/"+c.replica.Role)
	}
	if !slices.Equal(names, []string{"api-0/api", "api-1/api", "queue-0/queue"}) {
		t.Fatalf("members %v", names)
	}
	eps := d.Endpoints("dep1")
	if len(eps) != 2 || eps[0] == eps[1] {
		t.Fatalf("endpoints %v, want the two API replicas", eps)
	}
	if err := d.CheckHealth(ctx, "dep1", "rev1"); err != nil {
		t.Fatal(err)
	}
	pid := func(c *child) int {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.cmd == nil {
			return 0
		}
		return c.cmd.Process.Pid
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	first := pid(g.members[0])
	if err := syscall.Kill(-first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor("api-0 to leave the rotation", func() bool { return len(d.Endpoints("dep1")) == 1 })
	if got := d.Endpoints("dep1"); len(got) != 1 || got[0] != eps[1] {
		t.Fatalf("with api-0 down: %v", got)
	}
	if err := d.CheckHealth(ctx, "dep1", "rev1"); err != nil {
		t.Fatalf("with api-1 serving, the revision is unhealthy: %v", err)
	}
	waitFor("api-0 to come back", func() bool { p := pid(g.members[0]); return p != 0 && p != first && len(d.Endpoints("dep1")) == 2 })

	for _, c := range g.members[:2] {
		if err := syscall.Kill(-pid(c), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	waitFor("both API replicas to be down", func() bool { return len(d.Endpoints("dep1")) == 0 })
	if err := d.CheckHealth(ctx, "dep1", "rev1"); err == nil {
		t.Fatal("with no API replica the revision is healthy")
	}

	if err := d.Stop(ctx, "dep1", "rev1"); err != nil {
		t.Fatal(err)
	}
	for _, c := range g.members {
		select {
		case <-c.done:
		default:
			t.Fatalf("replica %s still supervised after Stop", c.replica.Name)
		}
	}
}
