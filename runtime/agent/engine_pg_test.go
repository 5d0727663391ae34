package agent

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"slipway/storage"
)

// TestEngineOnPostgres runs engine-level tests written for the bbolt
// store (history pages, host checkpoint rows, the host's store, run
// listing: through the engine's own methods, with their read bounds;
// crons and TTL sweeps through a fake clock; cancels) on
// an engine whose Store is PostgreSQL.
func TestEngineOnPostgres(t *testing.T) {
	start := func(t *testing.T) *Engine { return startEngineWith(t, openPGTestStore(t)) }
	for _, c := range []struct {
		name string
		run  func(*testing.T, func(*testing.T) *Engine)
	}{
		{"HistoryReadsOnlyItsPage", testHistoryReadsOnlyItsPage},
		{"HostHistoryReadsOnlyItsPage", testHostHistoryReadsOnlyItsPage},
		{"LGScanBack", testLGScanBack},
		{"HistoryBeforeUnorderedIDs", testHistoryBeforeUnorderedIDs},
		{"StateAtCheckpointSeeks", testStateAtCheckpointSeeks},
		{"HostCheckpointStore", testHostCheckpointStore},
		{"HostStore", testHostStore},
		{"HostCheckpointRowsCompact", testHostCheckpointRowsCompact},
		{"ListRunsReadsOnlyItsPage", testListRunsReadsOnlyItsPage},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, start) })
	}
	cronStart := func(t *testing.T) (*Engine, *fakeClock) {
		return clockEngineWith(t, "2026-01-15T10:01:00Z", TTLConfig{}, openPGTestStore(t))
	}
	for _, c := range []struct {
		name string
		run  func(*testing.T, func(*testing.T) (*Engine, *fakeClock))
	}{
		{"CronFiring", testCronFiring},
		{"StatelessCron", testStatelessCron},
		{"CronSearch", testCronSearch},
		{"CronsGoWithTheirThreadOrAssistant", testCronsGoWithTheirThreadOrAssistant},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, cronStart) })
	}
	ttlStart := func(t *testing.T, cfg TTLConfig) (*Engine, *fakeClock) {
		return clockEngineWith(t, "2026-03-01T10:00:00Z", cfg, openPGTestStore(t))
	}
	for _, c := range []struct {
		name string
		run  func(*testing.T, func(*testing.T, TTLConfig) (*Engine, *fakeClock))
	}{
		{"TTLSweep", testTTLSweep},
		{"TTLDefaultAndLimit", testTTLDefaultAndLimit},
		{"KeepLatestLG", testKeepLatestLG},
		{"PruneThreadsDelete", testPruneThreadsDelete},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, ttlStart) })
	}
	t.Run("CancelIsRecordedBeforeItReturns", func(t *testing.T) {
		testCancelIsRecordedBeforeItReturns(t, func(t *testing.T, graphs map[string]Graph) *Engine {
			return startCancelEngineWith(t, filepath.Join(t.TempDir(), "agent.db"), graphs, openPGTestStore(t))
		})
	})
}

// An engine that starts on a PostgreSQL store another process left with
// runs in flight (a crash) ends them as a bbolt engine's restart does: a
// running run as cut short by the restart, a cancelled one as its cancel
// said, and the queued run behind it then runs.
func TestEngineOnPostgresRecoversARestart(t *testing.T) {
	s := openPGTestStore(t)
	now := time.Now().UTC()
	type left struct{ thread, run string }
	mk := func(status, cancel string, queued bool) (left, string) {
		tid, rid := storage.NewID().String(), storage.NewID().String()
		tr := &threadRecord{Thread: Thread{ThreadID: tid, CreatedAt: now, UpdatedAt: now, Status: ThreadBusy, Metadata: map[string]any{}}, Active: rid}
		runs := []*runRecord{{Run: Run{RunID: rid, ThreadID: tid, AssistantID: AssistantID("echo"), CreatedAt: now, UpdatedAt: now,
			Status: status, Metadata: map[string]any{}}, CancelAction: cancel}}
		next := ""
		if queued {
			next = storage.NewID().String()
			tr.Queue = []string{next}
			runs = append(runs, &runRecord{Run: Run{RunID: next, ThreadID: tid, AssistantID: AssistantID("echo"), CreatedAt: now, UpdatedAt: now,
				Status: RunPending, Metadata: map[string]any{}, Kwargs: map[string]any{"input": map[string]any{
					"messages": []any{map[string]any{"role": "user", "content": "after the crash"}}}}}})
		}
		mustUpdate(t, s, func(tx Tx) error {
			for _, r := range runs {
				if err := errors.Join(tx.PutRun(r), tx.IndexRun(tid, r.RunID)); err != nil {
					return err
				}
			}
			return tx.PutThread(tr)
		})
		return left{tid, rid}, next
	}
	cut, queued := mk(RunRunning, "", true)
	cancelled, _ := mk(RunInterrupted, StrategyInterrupt, false)
	e := startEngineWith(t, s)
	if r, err := e.GetRun(cut.thread, cut.run); err != nil || r.Status != RunError {
		t.Fatalf("the run the crash cut short: %+v %v, want error", r, err)
	}
	if r, err := e.GetRun(cancelled.thread, cancelled.run); err != nil || r.Status != RunInterrupted || r.Error != "" {
		t.Fatalf("the cancelled run: %+v %v, want interrupted as its cancel said", r, err)
	}
	if _, err := e.Join(t.Context(), cut.thread, queued); err != nil {
		t.Fatal(err)
	}
	if r, err := e.GetRun(cut.thread, queued); err != nil || r.Status != RunSuccess {
		t.Fatalf("the run queued behind it: %+v %v, want success", r, err)
	}
}
