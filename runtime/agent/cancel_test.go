package agent

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

// lateGraph is a graph slow to stop: it ignores its context until the
// test releases it, then completes as if it had not been cancelled.
type lateGraph struct {
	once    sync.Once
	started chan struct{}
	release chan struct{}
}

func (g *lateGraph) Run(_ context.Context, _ Request, emit func(string, map[string]any, []Event) error) error {
	g.once.Do(func() { close(g.started) })
	<-g.release
	return emit("work", map[string]any{"done": true}, nil)
}

func startCancelEngine(t *testing.T, path string, graphs map[string]Graph) *Engine {
	t.Helper()
	return startCancelEngineWith(t, path, graphs, nil)
}

// startCancelEngineWith is startCancelEngine on store (nil: the bbolt file
// at path).
func startCancelEngineWith(t *testing.T, path string, graphs map[string]Graph, store Store) *Engine {
	t.Helper()
	db, err := storage.Open(path, time.Second, Migrations)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	e := &Engine{DB: db, Store: store, Graphs: graphs, Workers: 2, Timeout: time.Minute, Log: zerolog.Nop()}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(); e.Wait(); db.Close() })
	return e
}

// TestCancelIsRecordedBeforeItReturns: a cancelled running run reads
// interrupted as soon as Cancel returns, though its graph is still
// running; it cannot be deleted until it has unwound; and its end keeps
// what the cancel said even when the graph then completes: interrupted,
// or (rollback, also as a second cancel) deleted.
func TestCancelIsRecordedBeforeItReturns(t *testing.T) {
	testCancelIsRecordedBeforeItReturns(t, func(t *testing.T, graphs map[string]Graph) *Engine {
		return startCancelEngine(t, filepath.Join(t.TempDir(), "agent.db"), graphs)
	})
}

func testCancelIsRecordedBeforeItReturns(t *testing.T, start func(*testing.T, map[string]Graph) *Engine) {
	for _, tc := range []struct {
		name    string
		actions []string
		gone    bool
		error   string // the thread's afterwards (Thread.Error)
	}{
		{"interrupt", []string{StrategyInterrupt}, false, "UserInterrupt"},
		{"rollback", []string{StrategyRollback}, true, "UserRollback"},
		{"interrupt then rollback", []string{StrategyInterrupt, StrategyRollback}, true, "UserRollback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &lateGraph{started: make(chan struct{}), release: make(chan struct{})}
			e := start(t, map[string]Graph{"late": g})
			var releaseOnce sync.Once
			release := func() { releaseOnce.Do(func() { close(g.release) }) }
			t.Cleanup(release) // before the engine's: a failed test must not leave the run blocked
			th, err := e.CreateThread("", nil, "")
			if err != nil {
				t.Fatal(err)
			}
			run, _, err := e.CreateRun(th.ThreadID, RunCreate{AssistantID: "late", Input: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			<-g.started
			lr := e.liveRun(run.RunID)
			for _, action := range tc.actions {
				if err := e.Cancel(t.Context(), th.ThreadID, run.RunID, action, "", false); err != nil {
					t.Fatalf("cancel %s: %v", action, err)
				}
				if r, err := e.GetRun(th.ThreadID, run.RunID); err != nil || r.Status != RunInterrupted {
					t.Fatalf("right after cancel %s: %+v %v", action, r, err)
				}
			}
			if err := e.DeleteRun(th.ThreadID, run.RunID); !errors.Is(err, ErrConflict) {
				t.Fatalf("delete of a run still unwinding: %v", err)
			}
			if tr, _ := e.GetThread(th.ThreadID); tr.Status != ThreadBusy {
				t.Fatalf("thread while the run unwinds: %s", tr.Status)
			}
			release()
			<-lr.done
			r, err := e.GetRun(th.ThreadID, run.RunID)
			switch {
			case tc.gone && !errors.Is(err, ErrNotFound):
				t.Fatalf("rolled-back run after its end: %+v %v", r, err)
			case !tc.gone && (err != nil || r.Status != RunInterrupted):
				t.Fatalf("interrupted run after its graph completed: %+v %v", r, err)
			}
			if tr, _ := e.GetThread(th.ThreadID); tr.Status == ThreadBusy || tr.Error == nil || tr.Error.Error != tc.error {
				t.Fatalf("thread after the run ended: %s, error %+v, want %s", tr.Status, tr.Error, tc.error)
			}
		})
	}
}

// TestRestartEndsACancelledRunAsItsCancelSaid: a crash while a cancelled
// run unwinds leaves it active in the records; the restart ends it as the
// cancel said (not as a run the restart cut short).
func TestRestartEndsACancelledRunAsItsCancelSaid(t *testing.T) {
	for _, tc := range []struct {
		action string
		gone   bool
		error  string // the thread's afterwards (Thread.Error)
	}{{StrategyInterrupt, false, "UserInterrupt"}, {StrategyRollback, true, "UserRollback"}} {
		t.Run(tc.action, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "agent.db")
			db, err := storage.Open(path, time.Second, Migrations)
			if err != nil {
				t.Fatal(err)
			}
			tid, rid := storage.NewID().String(), storage.NewID().String()
			now := time.Now().UTC()
			err = db.Update(func(tx *bolt.Tx) error {
				tr := threadRecord{Thread: Thread{ThreadID: tid, CreatedAt: now, UpdatedAt: now, Status: ThreadBusy}, Active: rid}
				rr := runRecord{Run: Run{RunID: rid, ThreadID: tid, AssistantID: AssistantID("echo"), CreatedAt: now, UpdatedAt: now,
					Status: RunInterrupted}, CancelAction: tc.action}
				// Through the store: its busy index is what the restart reads.
				if err := (&boltTx{tx: tx}).PutThread(&tr); err != nil {
					return err
				}
				if err := tx.Bucket([]byte(bThreadRuns)).Put(idxKey(tid, rid), nil); err != nil {
					return err
				}
				return putJSON(tx.Bucket([]byte(bRuns)), rid, &rr)
			})
			db.Close()
			if err != nil {
				t.Fatal(err)
			}
			e := startCancelEngine(t, path, map[string]Graph{"echo": Echo{}})
			r, err := e.GetRun(tid, rid)
			switch {
			case tc.gone && !errors.Is(err, ErrNotFound):
				t.Fatalf("rolled-back run after restart: %+v %v", r, err)
			case !tc.gone && (err != nil || r.Status != RunInterrupted || r.Error != ""):
				t.Fatalf("interrupted run after restart: %+v %v", r, err)
			}
			if tr, _ := e.GetThread(tid); tr.Status != ThreadInterrupted || tr.Error == nil || tr.Error.Error != tc.error {
				t.Fatalf("thread after restart: %s, error %+v, want %s", tr.Status, tr.Error, tc.error)
			}
		})
	}
}

// TestStrategiesStopQueuedRunsToo: as on the reference servers, a run
// created with the interrupt or rollback strategy stops every run in
// flight on its thread, the queued ones too: they never start, and end
// interrupted or (rollback) deleted, their joins returning. Single
// process (a running run, one queued behind it) and as replicas (an API
// process whose runs stay queued: no worker claims them).
func TestStrategiesStopQueuedRunsToo(t *testing.T) {
	for _, tc := range []struct {
		strategy string
		gone     bool
	}{{StrategyInterrupt, false}, {StrategyRollback, true}} {
		t.Run(tc.strategy, func(t *testing.T) {
			g := &lateGraph{started: make(chan struct{}), release: make(chan struct{})}
			e := startCancelEngine(t, filepath.Join(t.TempDir(), "agent.db"), map[string]Graph{"late": g, "echo": Echo{}})
			release := sync.OnceFunc(func() { close(g.release) })
			t.Cleanup(release) // before the engine's: a failed test must not leave the run blocked
			th, err := e.CreateThread("", nil, "")
			if err != nil {
				t.Fatal(err)
			}
			running, _, err := e.CreateRun(th.ThreadID, RunCreate{AssistantID: "late", Input: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			<-g.started
			queued, _, err := e.CreateRun(th.ThreadID, RunCreate{AssistantID: "echo", Input: map[string]any{}, MultitaskStrategy: StrategyEnqueue})
			if err != nil || queued.Status != RunPending {
				t.Fatalf("queued run: %+v %v", queued, err)
			}
			newer, _, err := e.CreateRun(th.ThreadID, RunCreate{AssistantID: "echo", Input: map[string]any{}, MultitaskStrategy: tc.strategy})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			if _, err := e.Join(ctx, th.ThreadID, queued.RunID); err != nil && !errors.Is(err, ErrNotFound) {
				t.Fatalf("join of the queued run: %v", err)
			}
			checkDropped(t, e, th.ThreadID, queued.RunID, tc.gone)
			// The running run is released only now: had the queued one been
			// left in the queue, it would still be pending here.
			release()
			if _, err := e.Join(ctx, th.ThreadID, newer.RunID); err != nil {
				t.Fatal(err)
			}
			if r, err := e.GetRun(th.ThreadID, newer.RunID); err != nil || r.Status != RunSuccess {
				t.Fatalf("the newer run: %+v %v", r, err)
			}
			checkDropped(t, e, th.ThreadID, queued.RunID, tc.gone)
			checkDropped(t, e, th.ThreadID, running.RunID, tc.gone)
		})
		t.Run(tc.strategy+" as replicas", func(t *testing.T) {
			ctx, stop := context.WithCancel(t.Context())
			e := &Engine{Store: openPGTestStore(t), Bus: redisTestBus(t), Role: RoleAPI, WorkerID: "api", Lease: 3 * time.Second,
				Graphs: map[string]Graph{"echo": Echo{}}, Workers: 2, Timeout: time.Minute, Log: zerolog.Nop()}
			if err := e.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { stop(); e.Wait() })
			th, err := e.CreateThread("", nil, "")
			if err != nil {
				t.Fatal(err)
			}
			queued, _, err := e.CreateRun(th.ThreadID, RunCreate{AssistantID: "echo", Input: map[string]any{}})
			if err != nil || queued.Status != RunPending {
				t.Fatalf("queued run: %+v %v", queued, err)
			}
			newer, _, err := e.CreateRun(th.ThreadID, RunCreate{AssistantID: "echo", Input: map[string]any{}, MultitaskStrategy: tc.strategy})
			if err != nil {
				t.Fatal(err)
			}
			checkDropped(t, e, th.ThreadID, queued.RunID, tc.gone)
			var queue []string
			err = e.store.ViewThread(t.Context(), th.ThreadID, func(tx ReadTx) error {
				tr, err := tx.GetThread(th.ThreadID)
				if err == nil {
					queue = tr.Queue
				}
				return err
			})
			if err != nil || len(queue) != 1 || queue[0] != newer.RunID {
				t.Fatalf("the thread's queue after the %s: %v %v, want only the newer run", tc.strategy, queue, err)
			}
		})
	}
}

// checkDropped checks a run a strategy stopped: deleted (gone) or
// interrupted.
func checkDropped(t *testing.T, e *Engine, threadID, runID string, gone bool) {
	t.Helper()
	r, err := e.GetRun(threadID, runID)
	switch {
	case gone && !errors.Is(err, ErrNotFound):
		t.Fatalf("the queued run after a rollback: %+v %v, want it deleted", r, err)
	case !gone && (err != nil || r.Status != RunInterrupted):
		t.Fatalf("the queued run after an interrupt: %+v %v, want it interrupted", r, err)
	}
}
