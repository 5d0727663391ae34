package agent

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// wakeGraphs are the graphs of the wake-up tests: a quick one and one
// that streams until it is stopped (about 20 s).
var wakeGraphs = map[string]Graph{"echo": Echo{}, "slow": tickGraph{n: 1000, every: 20 * time.Millisecond}}

// startWakeEngine starts an engine of a replica deployment over store,
// on its own connection to Redis under prefix (as a process has), with
// workers slots and the safety-net poll every poll; stopped at cleanup.
func startWakeEngine(t *testing.T, store Store, prefix, name, role string, workers int, poll time.Duration) *Engine {
	t.Helper()
	bus, err := OpenRedisBus(context.Background(), redisTestURL(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bus.Close() })
	return startWakeEngineOn(t, store, bus, name, role, workers, poll)
}

func startWakeEngineOn(t *testing.T, store Store, bus RunBus, name, role string, workers int, poll time.Duration) *Engine {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	e := &Engine{Store: store, Bus: bus, Role: role, WorkerID: name, Lease: 3 * time.Second, PollEvery: poll,
		Graphs: wakeGraphs, Workers: workers, Timeout: time.Minute, Log: zerolog.Nop()}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(); e.Wait() })
	return e
}

// waitRunEnds waits up to within for the run to succeed and returns it.
func waitRunEnds(t *testing.T, e *Engine, thread, run string, within time.Duration) Run {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r, err := e.GetRun(thread, run)
		if err == nil && r.Status == RunSuccess {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v the run is %s (%v)", within, r.Status, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// noPoll is a poll interval no test lasts: what a worker claims, a
// wake-up brought it.
const noPoll = time.Hour

// TestOneWorkerClaimsEachWakeUp: of three idle workers, one takes each
// run's wake-up, so every claim finds its run: no worker opens a claim
// transaction for a run another worker has (as every worker did when a
// wake-up was broadcast).
func TestOneWorkerClaimsEachWakeUp(t *testing.T) {
	store := openPGTestStore(t)
	prefix := redisTestBus(t).prefix
	api := startWakeEngine(t, store, prefix, "api", RoleAPI, 1, noPoll)
	var workers []*Engine
	for i := range 3 {
		workers = append(workers, startWakeEngine(t, store, prefix, fmt.Sprint("worker-", i), RoleQueue, 4, noPoll))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const runs = 12
	type made struct{ thread, run string }
	var all []made
	for range runs {
		thread, run := createRun(t, api, "echo", map[string]any{"n": 1})
		all = append(all, made{thread, run})
	}
	byWorker := map[string]int{}
	for _, m := range all {
		if _, err := api.Join(ctx, m.thread, m.run); err != nil {
			t.Fatal(err)
		}
		r := waitRunEnds(t, api, m.thread, m.run, 10*time.Second)
		byWorker[fmt.Sprint(r.Metadata["worker"])]++
		if fmt.Sprint(r.Metadata["attempt"]) != "1" {
			t.Fatalf("run %s: attempt %v, want 1", m.run, r.Metadata["attempt"])
		}
	}
	empty := int64(0)
	for _, w := range workers {
		empty += w.emptyClaims.Load()
	}
	if empty != 0 {
		t.Fatalf("%d claims found nothing for %d runs (runs by worker: %v): a wake-up reached more than one worker", empty, runs, byWorker)
	}
}

// TestBusyWorkerLeavesWakeUpsToIdleOnes: a worker with no free slot does
// not take a wake-up; a worker that starts idle later takes it and runs
// the run at once (had the busy worker taken it, the run would wait for
// the busy worker's slot or the poll).
func TestBusyWorkerLeavesWakeUpsToIdleOnes(t *testing.T) {
	store := openPGTestStore(t)
	prefix := redisTestBus(t).prefix
	api := startWakeEngine(t, store, prefix, "api", RoleAPI, 1, noPoll)
	busy := startWakeEngine(t, store, prefix, "busy", RoleQueue, 1, noPoll)
	slowThread, slowRun := createRun(t, api, "slow", map[string]any{})
	for {
		r, err := api.GetRun(slowThread, slowRun)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == RunRunning {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(func() { _ = api.Cancel(context.Background(), slowThread, slowRun, StrategyInterrupt, "", true) })
	thread, quick := createRun(t, api, "echo", map[string]any{"n": 1})
	// Long enough for the busy worker to take the wake-up if it would.
	time.Sleep(1500 * time.Millisecond)
	startWakeEngine(t, store, prefix, "idle", RoleQueue, 1, noPoll)
	r := waitRunEnds(t, api, thread, quick, 5*time.Second)
	if r.Metadata["worker"] != "idle" {
		t.Fatalf("the run was executed by %v, want the idle worker", r.Metadata["worker"])
	}
	if n := busy.emptyClaims.Load(); n != 0 {
		t.Fatalf("the busy worker made %d claims that found nothing", n)
	}
}

// TestLostWakeUpFoundByPoll: a run whose wake-up was lost — taken by a
// worker that died before it claimed, or never queued because Redis was
// away — is claimed by a worker's poll.
func TestLostWakeUpFoundByPoll(t *testing.T) {
	for _, c := range []struct {
		name string
		// queue admits a run on an API engine and loses its wake-up.
		lose func(t *testing.T, store Store, bus *redisBus) (api *Engine)
	}{
		{"taken by a worker that died", func(t *testing.T, store Store, bus *redisBus) *Engine {
			return startWakeEngine(t, store, bus.prefix, "api", RoleAPI, 1, noPoll)
		}},
		{"Redis away when it was queued", func(t *testing.T, store Store, bus *redisBus) *Engine {
			// An API replica whose Redis is gone: nothing listens on port 1.
			away := &redisBus{rdb: redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1}), prefix: bus.prefix}
			t.Cleanup(func() { _ = away.Close() })
			return startWakeEngineOn(t, store, away, "api", RoleAPI, 1, noPoll)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := openPGTestStore(t)
			bus := redisTestBus(t)
			api := c.lose(t, store, bus)
			thread, run := createRun(t, api, "echo", map[string]any{"n": 1})
			// The worker that took the wake-up and died (with Redis away,
			// there is none to take).
			_, _ = bus.TakeWake(context.Background(), time.Second)
			if n, err := bus.rdb.LLen(context.Background(), bus.wakeups()).Result(); err != nil || n != 0 {
				t.Fatalf("wake-ups left: %d %v, want none", n, err)
			}
			began := time.Now()
			startWakeEngine(t, store, bus.prefix, "worker", RoleQueue, 2, 300*time.Millisecond)
			waitRunEnds(t, api, thread, run, 5*time.Second)
			t.Logf("the poll found the run after %v", time.Since(began).Round(time.Millisecond))
		})
	}
}

// createRun creates a thread and a run of graph on it through api.
func createRun(t *testing.T, api *Engine, graph string, input map[string]any) (thread, run string) {
	t.Helper()
	th, err := api.CreateThread("", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := api.CreateRun(th.ThreadID, RunCreate{AssistantID: graph, Input: input})
	if err != nil {
		t.Fatal(err)
	}
	return th.ThreadID, r.RunID
}
