package agent

import (
	"path/filepath"
	"testing"
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
