package hosts

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// The test binary doubles as a host process: run with fakeHostEnv set, it
// speaks the protocol on fd 3 ("pid" answers its process id, "hold" waits
// for the given milliseconds first) until the channel closes.
const fakeHostEnv = "SLIPWAY_TEST_FAKE_HOST"

func TestMain(m *testing.M) {
	if os.Getenv(fakeHostEnv) == "1" {
		os.Exit(fakeHost())
	}
	os.Exit(m.Run())
}

type fakeHostHandler struct{}

func (fakeHostHandler) Request(ctx context.Context, m string, p json.RawMessage) (any, error) {
	switch m {
	case "pid":
		return os.Getpid(), nil
	case "nice":
		return threadNices(os.Getpid())
	case "hold":
		var ms int
		_ = json.Unmarshal(p, &ms)
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
		case <-ctx.Done():
		}
		return os.Getpid(), nil
	}
	return nil, &Error{Type: "NotFound", Message: "no method " + m}
}

func (fakeHostHandler) Notify(string, json.RawMessage) {}

func fakeHost() int {
	nc, err := net.FileConn(os.NewFile(3, "host-channel"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c := NewConn(nc, fakeHostHandler{})
	if err := c.Notify("ready", Ready{Protocol: ProtocolVersion, Language: "fake"}); err != nil {
		return 1
	}
	<-c.Done()
	return 0
}

func startFakePool(t *testing.T, n int) *Pool {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	spec := Spec{Language: "fake", Argv: []string{os.Args[0], "-test.run=^$"}, Env: append(os.Environ(), fakeHostEnv+"=1"), ReadyTimeout: 30 * time.Second}
	p, _, err := StartPool(ctx, spec, n, &echoHandler{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for p.Size() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d processes joined the pool", p.Size(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return p
}

func pidOf(t *testing.T, m *Member) int {
	t.Helper()
	var pid int
	if err := m.Call(context.Background(), "pid", nil, &pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// TestPoolSpreadsCalls: calls in flight at once go to different processes,
// and a member keeps answering from its own process (a run's cancel must
// reach the process that runs it).
func TestPoolSpreadsCalls(t *testing.T) {
	for _, n := range []int{1, 2, 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			p := startFakePool(t, n)
			const calls = 12
			var mu sync.Mutex
			per := map[int]int{}
			var wg sync.WaitGroup
			for range calls {
				m := p.Pick()
				want := pidOf(t, m)
				before := m.calls.Load()
				wg.Add(1)
				go func() {
					defer wg.Done()
					var pid int
					if err := m.Call(context.Background(), "hold", 1500, &pid); err != nil {
						t.Error(err)
						return
					}
					if pid != want {
						t.Errorf("a member answered from process %d, then %d", want, pid)
					}
					mu.Lock()
					per[pid]++
					mu.Unlock()
				}()
				// Pick reads the calls in flight: let this one be counted.
				for m.calls.Load() == before {
					time.Sleep(time.Millisecond)
				}
			}
			wg.Wait()
			if len(per) != n {
				t.Fatalf("calls went to %d processes, want %d: %v", len(per), n, per)
			}
			for pid, c := range per {
				if c != calls/n {
					t.Errorf("process %d took %d of %d calls, want %d each: %v", pid, c, calls, calls/n, per)
				}
			}
		})
	}
}

// TestPoolSkipsARestartingMember: while one process is down, calls go to
// the others; it rejoins when its restart is ready.
func TestPoolSkipsARestartingMember(t *testing.T) {
	p := startFakePool(t, 2)
	dead := p.Pick()
	deadPid := pidOf(t, dead)
	if err := syscall.Kill(deadPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for dead.isUp() {
		if time.Now().After(deadline) {
			t.Fatal("the killed process still counts as up")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for range 5 {
		m := p.Pick()
		if m == dead {
			t.Fatal("Pick chose the member whose process is down")
		}
		if pidOf(t, m) == deadPid {
			t.Fatal("a call reached the killed process")
		}
	}
	for !dead.isUp() {
		if time.Now().After(deadline.Add(20 * time.Second)) {
			t.Fatal("the killed process was not restarted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := p.Restarts(); got != 1 {
		t.Errorf("restarts: %d, want 1", got)
	}
	if pid := pidOf(t, dead); pid == deadPid {
		t.Errorf("the restarted member answers from the killed process %d", pid)
	}
}
