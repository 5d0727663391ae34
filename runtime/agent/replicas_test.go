package agent

import (
	"context"
	"fmt"
	"sync/atomic"
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

// overlapGraph records how many of its runs execute at once.
type overlapGraph struct{ now, most *atomic.Int32 }

func (g overlapGraph) Run(ctx context.Context, _ Request, emit func(string, map[string]any, []Event) error) error {
	n := g.now.Add(1)
	defer g.now.Add(-1)
	for {
		m := g.most.Load()
		if n <= m || g.most.CompareAndSwap(m, n) {
			break
		}
	}
	select {
	case <-time.After(100 * time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	return emit("overlap", map[string]any{"ran": true}, nil)
}

// TestEnginesShareRunsAcrossProcesses: an API engine and two queue
// engines over one PostgreSQL store, each with its own connection to one
// Redis prefix, as processes are. A run admitted by the API engine
// executes on a worker, its stream reaches the API engine's reader whole
// and in order, a cancel made on the API engine stops a run on its
// worker, enqueued runs of a thread run one at a time across the
// workers, and the API engine never executes a run.
func TestEnginesShareRunsAcrossProcesses(t *testing.T) {
	store := openPGTestStore(t)
	first := redisTestBus(t)
	var now, most atomic.Int32
	graphs := map[string]Graph{"ticks": tickGraph{n: 20, every: 20 * time.Millisecond}, "slow": tickGraph{n: 1000, every: 20 * time.Millisecond},
		"overlap": overlapGraph{now: &now, most: &most}}
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
	if err := api.Cancel(ctx, th.ThreadID, slow.RunID, StrategyInterrupt, "", true); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Fatalf("the cancel took %v to stop the run on its worker", took)
	}
	if r, _ := api.GetRun(th.ThreadID, slow.RunID); r.Status != RunInterrupted {
		t.Fatalf("cancelled run: %s", r.Status)
	}
	// enqueue: runs queued on one thread run one after another, though
	// two workers could take them.
	var queued []Run
	for range 4 {
		r, _, err := api.CreateRun(th.ThreadID, RunCreate{AssistantID: "overlap", Input: map[string]any{}, MultitaskStrategy: StrategyEnqueue})
		if err != nil {
			t.Fatal(err)
		}
		queued = append(queued, r)
	}
	if _, err := api.Join(ctx, th.ThreadID, queued[len(queued)-1].RunID); err != nil {
		t.Fatal(err)
	}
	for _, q := range queued {
		if r, _ := api.GetRun(th.ThreadID, q.RunID); r.Status != RunSuccess {
			t.Fatalf("enqueued run ended %s", r.Status)
		}
	}
	if most.Load() != 1 {
		t.Fatalf("%d runs of one thread executed at once", most.Load())
	}

	api.mu.Lock()
	live := len(api.live)
	api.mu.Unlock()
	if live != 0 {
		t.Fatalf("the API engine holds %d live runs: it executed or tracked runs", live)
	}
}

// TestPGClaimSkipsALockedThread: a worker's claim (SkipLocked) on a thread
// another unit of work holds returns nothing at once instead of waiting
// for that unit; once it committed, the claim finds the thread's run.
func TestPGClaimSkipsALockedThread(t *testing.T) {
	s := openPGTestStore(t)
	ctx := context.Background()
	th := newThreadRec("")
	r := newRunRec(th.ThreadID)
	th.Active, th.Queue = "", []string{r.RunID}
	mustUpdate(t, s, func(tx Tx) error {
		if err := tx.PutRun(r); err != nil {
			return err
		}
		return tx.PutThread(th)
	})
	locked, release := make(chan struct{}), make(chan struct{})
	holder := make(chan error, 1)
	go func() {
		once := false
		holder <- s.Update(ctx, func(tx Tx) error {
			// Another claimer holding the thread's row (FOR UPDATE).
			var one int
			if err := tx.(*pgTx).one("lock", "select 1 from threads where thread_id = $1 for update", []any{th.ThreadID}, &one); err != nil {
				return err
			}
			if !once {
				once = true
				close(locked)
				<-release
			}
			return nil
		})
	}()
	<-locked
	claim := runClaim{Worker: "w", Now: time.Now().UTC(), Lease: time.Minute, SkipLocked: true}
	began := time.Now()
	var got *runRecord
	// Bounded: a claim that waits for the lock fails here, not by hanging.
	bounded, stop := context.WithTimeout(ctx, 3*time.Second)
	err := s.Update(bounded, func(tx Tx) error {
		var err error
		got, err = tx.ClaimNextRun(th.ThreadID, claim)
		return err
	})
	stop()
	close(release)
	if err != nil || got != nil || time.Since(began) > 2*time.Second {
		t.Fatalf("claim of a locked thread: %v, %v after %v, want nothing at once", got, err, time.Since(began))
	}
	if err := <-holder; err != nil {
		t.Fatal(err)
	}
	mustUpdate(t, s, func(tx Tx) error {
		var err error
		got, err = tx.ClaimNextRun(th.ThreadID, claim)
		return err
	})
	if got == nil || got.RunID != r.RunID || got.Lease == nil || got.Lease.Worker != "w" {
		t.Fatalf("claim once the thread is free: %+v", got)
	}
}

// TestWorkerAdoptsARunLeftUnleased: a run that one process (without
// Redis) was executing when it stopped has no lease; once the deployment
// runs as replicas, a worker takes it over as its second attempt, and
// then the run queued behind it.
func TestWorkerAdoptsARunLeftUnleased(t *testing.T) {
	store := openPGTestStore(t)
	bus := redisTestBus(t)
	th := newThreadRec("")
	left, behind := newRunRec(th.ThreadID), newRunRec(th.ThreadID)
	left.Status = RunRunning
	th.Active, th.Queue, th.Status = left.RunID, []string{behind.RunID}, ThreadBusy
	ctx, stop := context.WithCancel(context.Background())
	e := &Engine{Store: store, Bus: bus, Role: RoleQueue, WorkerID: "worker", Lease: 3 * time.Second, PollEvery: 100 * time.Millisecond,
		Graphs: map[string]Graph{"echo": Echo{}}, Workers: 2, Timeout: time.Minute, Log: zerolog.Nop()}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(); e.Wait() })
	mustUpdate(t, store, func(tx Tx) error {
		for _, r := range []*runRecord{left, behind} {
			r.AssistantID = "echo"
			if err := tx.PutRun(r); err != nil {
				return err
			}
			if err := tx.IndexRun(th.ThreadID, r.RunID); err != nil {
				return err
			}
		}
		return tx.PutThread(th)
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, err1 := e.GetRun(th.ThreadID, left.RunID)
		b, err2 := e.GetRun(th.ThreadID, behind.RunID)
		if err1 == nil && err2 == nil && a.Status == RunSuccess && b.Status == RunSuccess {
			if fmt.Sprint(a.Metadata["attempt"]) != "2" {
				t.Fatalf("the adopted run's attempt: %v, want 2", a.Metadata["attempt"])
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: the run left unleased is %s (%v), the one behind it %s (%v)", a.Status, err1, b.Status, err2)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
