package agent

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// tickGraph emits n custom events every, then an update: a run that
// streams for a while.
type tickGraph struct {
	n     int
	every time.Duration
}

func (g tickGraph) Run(ctx context.Context, _ Request, emit func(string, map[string]any, []Event) error) error {
	for i := 1; i <= g.n; i++ {
		select {
		case <-time.After(g.every):
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := emit("ticks", nil, []Event{{Mode: "custom", Data: map[string]any{"tick": i}}}); err != nil {
			return err
		}
	}
	return emit("ticks", map[string]any{"done": true}, nil)
}

// TestEnginesShareRunsAcrossProcesses: an API engine and two queue
// engines over one PostgreSQL store, each with its own connection to one
// Redis prefix, as processes are. A run admitted by the API engine
// executes on a worker, its stream reaches the API engine's reader whole
// and in order, a cancel made on the API engine stops a run on its
// worker, and the API engine never executes a run.
func TestEnginesShareRunsAcrossProcesses(t *testing.T) {
	store := openPGTestStore(t)
	first := redisTestBus(t)
	graphs := map[string]Graph{"ticks": tickGraph{n: 20, every: 20 * time.Millisecond}, "slow": tickGraph{n: 1000, every: 20 * time.Millisecond}}
	start := func(name, role string) *Engine {
		bus := RunBus(first)
		if name != "api" {
			b, err := OpenRedisBus(context.Background(), redisTestURL(), first.prefix)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close() })
			bus = b
		}
		ctx, stop := context.WithCancel(context.Background())
		e := &Engine{Store: store, Bus: bus, Role: role, WorkerID: name, Lease: 3 * time.Second, PollEvery: 200 * time.Millisecond,
			Graphs: graphs, Workers: 4, Timeout: time.Minute, Log: zerolog.Nop()}
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stop(); e.Wait() })
		return e
	}
	api := start("api", RoleAPI)
	workers := map[string]bool{}
	for _, name := range []string{"worker-1", "worker-2"} {
		start(name, RoleQueue)
		workers[name] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	th, err := api.CreateThread("", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	run, log, err := api.CreateRun(th.ThreadID, RunCreate{AssistantID: "ticks", Input: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	var evs []StreamEvent
	for after := 0; ; {
		got, done, err := log.Next(ctx, after)
		if err != nil {
			t.Fatalf("read the stream: %v", err)
		}
		if done {
			break
		}
		evs = append(evs, got...)
		after = got[len(got)-1].ID
	}
	custom := 0
	for i, ev := range evs {
		if ev.ID != i+1 {
			t.Fatalf("event %d has id %d: the stream lost or reordered events", i, ev.ID)
		}
		if ev.Event == "custom" {
			custom++
		}
	}
	if evs[0].Event != "metadata" || custom != 20 {
		t.Fatalf("stream: first %q, %d custom events, want metadata and 20", evs[0].Event, custom)
	}
	got, err := api.GetRun(th.ThreadID, run.RunID)
	if err != nil || got.Status != RunSuccess || !workers[got.Metadata["worker"].(string)] || got.Metadata["attempt"] != float64(1) {
		t.Fatalf("run: %v %+v", err, got)
	}

	slow, _, err := api.CreateRun(th.ThreadID, RunCreate{AssistantID: "slow", Input: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		r, err := api.GetRun(th.ThreadID, slow.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == RunRunning {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	began := time.Now()
	if err := api.Cancel(ctx, th.ThreadID, slow.RunID, StrategyInterrupt, true); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Fatalf("the cancel took %v to stop the run on its worker", took)
	}
	if r, _ := api.GetRun(th.ThreadID, slow.RunID); r.Status != RunInterrupted {
		t.Fatalf("cancelled run: %s", r.Status)
	}
	api.mu.Lock()
	live := len(api.live)
	api.mu.Unlock()
	if live != 0 {
		t.Fatalf("the API engine holds %d live runs: it executed or tracked runs", live)
	}
}
