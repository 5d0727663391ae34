package agent

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

func TestParseTTLConfig(t *testing.T) {
	for _, c := range []struct {
		name, raw string
		want      TTLConfig
		wantErr   string
	}{
		{name: "absent", raw: ``},
		{name: "no ttl", raw: `{"type": "default"}`},
		{name: "ttl null", raw: `{"ttl": null}`},
		{name: "all settings", raw: `{"ttl": {"strategy": "keep_latest", "default_ttl": 43200, "sweep_interval_minutes": 10, "sweep_limit": 500}}`,
			want: TTLConfig{Strategy: TTLKeepLatest, DefaultTTL: 43200, SweepInterval: 10 * time.Minute, SweepLimit: 500}},
		{name: "fractional minutes", raw: `{"ttl": {"default_ttl": 0.5}}`, want: TTLConfig{DefaultTTL: 0.5}},
		{name: "bad strategy", raw: `{"ttl": {"strategy": "archive"}}`, wantErr: "checkpointer.ttl.strategy"},
		{name: "strategy a number", raw: `{"ttl": {"strategy": 1}}`, wantErr: "checkpointer.ttl.strategy"},
		{name: "zero default", raw: `{"ttl": {"default_ttl": 0}}`, wantErr: "checkpointer.ttl.default_ttl"},
		{name: "negative default", raw: `{"ttl": {"default_ttl": -5}}`, wantErr: "checkpointer.ttl.default_ttl"},
		{name: "default a string", raw: `{"ttl": {"default_ttl": "1d"}}`, wantErr: "checkpointer.ttl.default_ttl"},
		{name: "default past 100 years", raw: `{"ttl": {"default_ttl": 1e12}}`, wantErr: "checkpointer.ttl.default_ttl"},
		{name: "interval zero", raw: `{"ttl": {"sweep_interval_minutes": 0}}`, wantErr: "checkpointer.ttl.sweep_interval_minutes"},
		{name: "interval fractional", raw: `{"ttl": {"sweep_interval_minutes": 1.5}}`, wantErr: "checkpointer.ttl.sweep_interval_minutes"},
		{name: "limit zero", raw: `{"ttl": {"sweep_limit": 0}}`, wantErr: "checkpointer.ttl.sweep_limit"},
		{name: "unknown key", raw: `{"ttl": {"default_tll": 5}}`, wantErr: "checkpointer.ttl.default_tll is not a setting"},
		{name: "ttl a number", raw: `{"ttl": 5}`, wantErr: "checkpointer.ttl must be an object"},
		{name: "checkpointer a list", raw: `[]`, wantErr: "checkpointer must be an object"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseTTLConfig(json.RawMessage(c.raw))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %+v %v, want %+v", got, err, c.want)
			}
		})
	}
	// Through LoadProject: a bad setting refuses the configuration.
	path := filepath.Join(t.TempDir(), "langgraph.json")
	if err := os.WriteFile(path, []byte(`{"graphs": {}, "checkpointer": {"ttl": {"strategy": "nope"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadProject(path); err == nil || !strings.Contains(err.Error(), "checkpointer.ttl.strategy") {
		t.Fatalf("LoadProject: %v", err)
	}
	if err := os.WriteFile(path, []byte(`{"graphs": {}, "checkpointer": {"ttl": {"default_ttl": 60}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if p, err := LoadProject(path); err != nil || p.TTL.DefaultTTL != 60 {
		t.Fatalf("LoadProject: %+v %v", p.TTL, err)
	}
}

// ttlEngine is an engine on a fresh database with a fake clock whose
// sweeper never ticks by itself: the tests sweep with SweepTTL.
func ttlEngine(t *testing.T, cfg TTLConfig) (*Engine, *fakeClock) {
	t.Helper()
	return clockEngine(t, "2026-03-01T10:00:00Z", cfg)
}

// ttlIndex lists the TTL index as (expiry, thread id) strings, read
// through the engine's store (so on either store).
func ttlIndex(t *testing.T, e *Engine) []string {
	t.Helper()
	var out []string
	err := e.store.View(context.Background(), func(tx ReadTx) error {
		due, err := tx.DueTTLEntries(time.Unix(0, math.MaxInt64), math.MaxInt32)
		for _, d := range due {
			out = append(out, time.Unix(0, int64(d.At)).UTC().Format(time.RFC3339)+" "+d.Thread)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func runEcho(t *testing.T, e *Engine, thread, text string) {
	t.Helper()
	r, _, err := e.CreateRun(thread, RunCreate{AssistantID: "echo", Input: map[string]any{
		"messages": []any{map[string]any{"role": "user", "content": text}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Join(t.Context(), thread, r.RunID); err != nil {
		t.Fatal(err)
	}
}

// TestTTLSweep drives the sweeper on a fake clock: an idle thread expires
// at updated_at + TTL, a thread used meanwhile does not (its index entry
// is moved), a busy one never, keep_latest keeps the thread with its
// latest state, and sweep_limit bounds a sweep.
func TestTTLSweep(t *testing.T) { testTTLSweep(t, ttlEngine) }

func testTTLSweep(t *testing.T, start func(*testing.T, TTLConfig) (*Engine, *fakeClock)) {
	var busyRun string
	type step struct {
		at    string
		do    func(t *testing.T, e *Engine, thread string)
		swept int
		exist bool // the thread exists after the step
		index int  // entries in the TTL index after the step
	}
	for _, c := range []struct {
		name  string
		ttl   ThreadTTL
		steps []step
	}{
		{name: "idle thread is deleted", ttl: ThreadTTL{Strategy: TTLDelete, Minutes: 10}, steps: []step{
			{at: "2026-03-01T10:09:59Z", swept: 0, exist: true, index: 1},
			{at: "2026-03-01T10:10:00Z", swept: 1, exist: false, index: 0},
		}},
		{name: "a run moves the expiry", ttl: ThreadTTL{Strategy: TTLDelete, Minutes: 10}, steps: []step{
			{at: "2026-03-01T10:08:00Z", do: func(t *testing.T, e *Engine, th string) { runEcho(t, e, th, "hi") }, swept: 0, exist: true, index: 1},
			// Due by its entry (10:10), not by its updated_at (10:18): re-keyed.
			{at: "2026-03-01T10:11:00Z", swept: 0, exist: true, index: 1},
			{at: "2026-03-01T10:17:59Z", swept: 0, exist: true, index: 1},
			{at: "2026-03-01T10:18:00Z", swept: 1, exist: false, index: 0},
		}},
		{name: "a state update moves the expiry", ttl: ThreadTTL{Strategy: TTLDelete, Minutes: 10}, steps: []step{
			{at: "2026-03-01T10:05:00Z", do: func(t *testing.T, e *Engine, th string) {
				runEcho(t, e, th, "hi")
			}, swept: 0, exist: true, index: 1},
			{at: "2026-03-01T10:12:00Z", do: func(t *testing.T, e *Engine, th string) {
				if _, err := e.UpdateState(th, map[string]any{"messages": []any{}}, ""); err != nil {
					t.Fatal(err)
				}
			}, swept: 0, exist: true, index: 1},
			{at: "2026-03-01T10:21:00Z", swept: 0, exist: true, index: 1},
			{at: "2026-03-01T10:22:00Z", swept: 1, exist: false, index: 0},
		}},
		{name: "a busy thread is never swept", ttl: ThreadTTL{Strategy: TTLDelete, Minutes: 10}, steps: []step{
			{at: "2026-03-01T10:01:00Z", do: func(t *testing.T, e *Engine, th string) {
				// Running for an hour: the thread stays busy.
				r, _, err := e.CreateRun(th, RunCreate{AssistantID: "echo", Input: map[string]any{"sleep": 3600.0}})
				if err != nil {
					t.Fatal(err)
				}
				busyRun = r.RunID
			}, swept: 0, exist: true, index: 1},
			{at: "2026-03-01T12:00:00Z", swept: 0, exist: true, index: 1},
			{at: "2026-03-02T12:00:00Z", swept: 0, exist: true, index: 1},
			// Once it is idle (its run cancelled at 12:00), it expires 10
			// minutes later.
			{at: "2026-03-02T12:00:00Z", do: func(t *testing.T, e *Engine, th string) {
				if err := e.Cancel(t.Context(), th, busyRun, "interrupt", "", true); err != nil {
					t.Fatal(err)
				}
			}, swept: 0, exist: true, index: 1},
			{at: "2026-03-02T12:10:00Z", swept: 1, exist: false, index: 0},
		}},
		{name: "keep_latest keeps the thread", ttl: ThreadTTL{Strategy: TTLKeepLatest, Minutes: 10}, steps: []step{
			{at: "2026-03-01T10:01:00Z", do: func(t *testing.T, e *Engine, th string) {
				for _, s := range []string{"one", "two", "three"} {
					runEcho(t, e, th, s)
				}
			}, swept: 0, exist: true, index: 1},
			{at: "2026-03-01T10:11:00Z", swept: 1, exist: true, index: 1},
			// Not updated since: nothing more to prune.
			{at: "2026-03-01T10:30:00Z", swept: 0, exist: true, index: 1},
			// A run after the prune works on the kept state; it moves the
			// expiry, and the thread is pruned again once idle.
			{at: "2026-03-01T10:35:00Z", do: func(t *testing.T, e *Engine, th string) {
				runEcho(t, e, th, "four")
				hist, _ := e.History(th, 0, "")
				st, _ := e.GetState(th, "")
				if msgs, _ := st.Values["messages"].([]any); len(hist) < 2 || len(msgs) != 8 {
					t.Fatalf("a run after keep_latest: %d checkpoints, %d messages; want more than 1, 8", len(hist), len(msgs))
				}
			}, swept: 0, exist: true, index: 1},
			{at: "2026-03-01T10:45:00Z", swept: 1, exist: true, index: 1},
		}},
		{name: "a patch with a new TTL moves the entry", ttl: ThreadTTL{Strategy: TTLDelete, Minutes: 10}, steps: []step{
			{at: "2026-03-01T10:05:00Z", do: func(t *testing.T, e *Engine, th string) {
				if _, err := e.PatchThreadTTL(th, nil, ThreadTTL{Strategy: TTLDelete, Minutes: 60}); err != nil {
					t.Fatal(err)
				}
			}, swept: 0, exist: true, index: 1},
			{at: "2026-03-01T11:04:59Z", swept: 0, exist: true, index: 1},
			{at: "2026-03-01T11:05:00Z", swept: 1, exist: false, index: 0},
		}},
		{name: "deleting the thread drops its entry", ttl: ThreadTTL{Strategy: TTLDelete, Minutes: 10}, steps: []step{
			{at: "2026-03-01T10:01:00Z", do: func(t *testing.T, e *Engine, th string) {
				if err := e.DeleteThread(th); err != nil {
					t.Fatal(err)
				}
			}, swept: 0, exist: false, index: 0},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, clk := start(t, TTLConfig{})
			th, err := e.CreateThread("", nil, "")
			if err != nil {
				t.Fatal(err)
			}
			if err := e.SetThreadTTL(th.ThreadID, &c.ttl); err != nil {
				t.Fatal(err)
			}
			before := map[string]any{}
			for i, s := range c.steps {
				clk.Set(s.at)
				if s.do != nil {
					s.do(t, e, th.ThreadID)
					if st, err := e.GetState(th.ThreadID, ""); err == nil {
						before = st.Values
					}
				}
				n, err := e.SweepTTL()
				if err != nil || n != s.swept {
					t.Fatalf("step %d (%s): swept %d %v, want %d", i, s.at, n, err, s.swept)
				}
				_, err = e.GetThread(th.ThreadID)
				if exists := err == nil; exists != s.exist || !exists && !errors.Is(err, ErrNotFound) {
					t.Fatalf("step %d: thread exists %v (%v), want %v", i, exists, err, s.exist)
				}
				if idx := ttlIndex(t, e); len(idx) != s.index {
					t.Fatalf("step %d: TTL index %v, want %d entries", i, idx, s.index)
				}
				if !s.exist {
					if runs, err := e.ListRuns(th.ThreadID, 10, 0, ""); err == nil && len(runs) > 0 {
						t.Fatalf("step %d: the deleted thread's runs remain: %v", i, runs)
					}
					continue
				}
				if c.ttl.Strategy == TTLKeepLatest && s.swept > 0 {
					hist, err := e.History(th.ThreadID, 0, "")
					if err != nil || len(hist) != 1 {
						t.Fatalf("step %d: history after keep_latest: %d checkpoints (%v), want 1", i, len(hist), err)
					}
					st, _ := e.GetState(th.ThreadID, "")
					if !reflect.DeepEqual(st.Values, before) {
						t.Fatalf("step %d: state changed by keep_latest:\n%v\nwant\n%v", i, st.Values, before)
					}
					if runs, _ := e.ListRuns(th.ThreadID, 10, 0, ""); len(runs) < 3 {
						t.Fatalf("step %d: keep_latest kept %d runs, want all", i, len(runs))
					}
				}
			}
		})
	}
}

// TestTTLDefaultAndLimit: threads created by runs (if_not_exists=create
// and stateless) and copies take the configured default TTL; a sweep
// handles at most sweep_limit threads.
func TestTTLDefaultAndLimit(t *testing.T) { testTTLDefaultAndLimit(t, ttlEngine) }

func testTTLDefaultAndLimit(t *testing.T, start func(*testing.T, TTLConfig) (*Engine, *fakeClock)) {
	e, clk := start(t, TTLConfig{Strategy: TTLKeepLatest, DefaultTTL: 30, SweepLimit: 2})
	id := storage.NewID().String()
	r, _, err := e.CreateRun(id, RunCreate{AssistantID: "echo", IfNotExists: "create", Input: map[string]any{"messages": []any{}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Join(t.Context(), id, r.RunID); err != nil {
		t.Fatal(err)
	}
	_, info, err := e.GetThreadTTL(id)
	if err != nil || info == nil || info.Strategy != TTLKeepLatest || info.TTLMinutes != 30 ||
		!info.ExpiresAt.Equal(clk.Now().Add(30*time.Minute)) {
		t.Fatalf("run-created thread's TTL: %+v %v", info, err)
	}
	// A stateless run's temporary thread has it too, and takes its index
	// entry with it when the run ends.
	_, log, err := e.CreateRun("", RunCreate{AssistantID: "echo", Input: map[string]any{"messages": []any{}}})
	if err != nil {
		t.Fatal(err)
	}
	<-log.closedCh() // after the transaction that ends the run
	cp, err := e.CopyThread(id)
	if err != nil {
		t.Fatal(err)
	}
	if _, info, _ := e.GetThreadTTL(cp.ThreadID); info == nil || info.TTLMinutes != 30 {
		t.Fatalf("copy's TTL: %+v", info)
	}
	// An explicit TTL is not replaced by the default.
	th, err := e.CreateThread("", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SetThreadTTL(th.ThreadID, &ThreadTTL{Strategy: TTLDelete, Minutes: 5}); err != nil {
		t.Fatal(err)
	}
	if err := e.SetThreadTTL(th.ThreadID, nil); err != nil {
		t.Fatal(err)
	}
	if _, info, _ := e.GetThreadTTL(th.ThreadID); info == nil || info.TTLMinutes != 5 || info.Strategy != TTLDelete {
		t.Fatalf("explicit TTL after the default: %+v", info)
	}
	if idx := ttlIndex(t, e); len(idx) != 3 {
		t.Fatalf("TTL index %v, want the 3 threads' entries", idx)
	}
	clk.Set("2026-03-01T11:00:00Z")
	if n, err := e.SweepTTL(); err != nil || n != 2 {
		t.Fatalf("first sweep: %d %v, want 2 (the limit)", n, err)
	}
	if n, err := e.SweepTTL(); err != nil || n != 1 {
		t.Fatalf("second sweep: %d %v, want 1", n, err)
	}
	if _, err := e.GetThread(th.ThreadID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the delete-strategy thread survived: %v", err)
	}
	for _, keep := range []string{id, cp.ThreadID} {
		if _, err := e.GetThread(keep); err != nil {
			t.Fatalf("a keep_latest thread was deleted: %v", err)
		}
	}
}

// lgKeys lists a thread's checkpoint rows, without the thread prefix,
// read through the engine's store (so on either store).
func lgKeys(t *testing.T, e *Engine, thread string) []string {
	t.Helper()
	var out []string
	prefix := lgKey(thread, "")
	err := e.store.ViewCheckpointRows(context.Background(), thread, func(lg checkpointRows) error {
		lg.scan(prefix, func(k, _ []byte) bool {
			parts := strings.SplitN(string(k[len(prefix):]), "\x00", 5)
			if parts[1] == lgKindWrite {
				parts = parts[:4] // without the write's idx bytes
			}
			out = append(out, strings.Join(parts, "|"))
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// TestKeepLatestLG prunes a language-host thread's rows as the host's
// saver writes them: per namespace, the latest checkpoint stays with the
// channel values it names and its own pending writes; older checkpoints,
// their writes and values no kept checkpoint names go, also when a run's
// writes still sit in the journal.
func TestKeepLatestLG(t *testing.T) { testKeepLatestLG(t, ttlEngine) }

func testKeepLatestLG(t *testing.T, start func(*testing.T, TTLConfig) (*Engine, *fakeClock)) {
	e, _ := start(t, TTLConfig{})
	th, err := e.CreateThread("", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	id := th.ThreadID
	put := func(ns, cp string, versions map[string]string, blobs ...[2]string) {
		in := &cpPut{ThreadID: id, NS: ns, CheckpointID: cp, ChannelVersions: versions, Checkpoint: Typed{T: "json", B: []byte("{}")},
			Metadata: Typed{T: "json", B: []byte("{}")}}
		for _, b := range blobs {
			in.Blobs = append(in.Blobs, struct {
				Channel string `json:"channel"`
				Version string `json:"version"`
				Typed
			}{b[0], b[1], Typed{T: "json", B: []byte(`"` + b[0] + b[1] + `"`)}})
		}
		if err := e.cpPut(in); err != nil {
			t.Fatal(err)
		}
	}
	writes := func(ns, cp, task string) {
		in := &cpPutWrites{ThreadID: id, NS: ns, CheckpointID: cp, TaskID: task}
		in.Writes = append(in.Writes, struct {
			Channel string `json:"channel"`
			Idx     int32  `json:"idx"`
			Typed
		}{"messages", 0, Typed{T: "json", B: []byte(`1`)}})
		if err := e.cpPutWrites(in); err != nil {
			t.Fatal(err)
		}
	}
	put("", "1f0-01", map[string]string{"messages": "1", "steps": "1"}, [2]string{"messages", "1"}, [2]string{"steps", "1"})
	writes("", "1f0-01", "t1")
	put("", "1f0-02", map[string]string{"messages": "2", "steps": "1"}, [2]string{"messages", "2"})
	writes("", "1f0-02", "t2")
	put("", "1f0-03", map[string]string{"messages": "3", "steps": "1"}, [2]string{"messages", "3"})
	writes("", "1f0-03", "t3")
	put("child:1", "1f0-04", map[string]string{"x": "1"}, [2]string{"x", "1"})
	put("child:1", "1f0-05", map[string]string{"x": "2"}, [2]string{"x", "2"})
	writes("child:1", "1f0-05", "t5")
	want := []string{
		"child:1|b|x|2", "child:1|c|1f0-05", "child:1|w|1f0-05|t5",
		"|b|messages|3", "|b|steps|1", "|c|1f0-03", "|w|1f0-03|t3",
	}
	sort.Strings(want)
	tuple := func() (tp *cpTuple, err error) {
		verr := e.store.ViewCheckpointRows(context.Background(), id, func(lg checkpointRows) error {
			tp, err = getTuple(lg, id, "", "")
			return nil
		})
		return tp, errors.Join(err, verr)
	}
	latest, err := tuple()
	if err != nil || latest == nil {
		t.Fatal(err)
	}
	if n, err := e.PruneThreads([]string{id, storage.NewID().String()}, TTLKeepLatest); err != nil || n != 1 {
		t.Fatalf("prune: %d %v, want 1 (the unknown thread is skipped)", n, err)
	}
	if got := lgKeys(t, e, id); !reflect.DeepEqual(got, want) {
		t.Fatalf("rows after keep_latest:\n%v\nwant\n%v", got, want)
	}
	after, err := tuple()
	if err != nil || !reflect.DeepEqual(after, latest) {
		t.Fatalf("latest checkpoint changed:\n%+v\nwant\n%+v (%v)", after, latest, err)
	}
}

// TestPruneThreadsDelete: the delete strategy is DELETE /threads/{id},
// counting only threads that existed.
func TestPruneThreadsDelete(t *testing.T) { testPruneThreadsDelete(t, ttlEngine) }

func testPruneThreadsDelete(t *testing.T, start func(*testing.T, TTLConfig) (*Engine, *fakeClock)) {
	e, _ := start(t, TTLConfig{})
	var ids []string
	for range 3 {
		th, err := e.CreateThread("", nil, "")
		if err != nil {
			t.Fatal(err)
		}
		runEcho(t, e, th.ThreadID, "x")
		ids = append(ids, th.ThreadID)
	}
	n, err := e.PruneThreads(append(ids[:2:2], storage.NewID().String()), TTLDelete)
	if err != nil || n != 2 {
		t.Fatalf("prune: %d %v, want 2", n, err)
	}
	for i, id := range ids {
		_, err := e.GetThread(id)
		if gone := errors.Is(err, ErrNotFound); gone != (i < 2) {
			t.Fatalf("thread %d: gone %v", i, gone)
		}
	}
	if _, err := e.PruneThreads(ids, "archive"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad strategy: %v", err)
	}
}

// TestTTLSweepSkipsABrokenThread: a thread whose record cannot be read is
// reported and left alone, and the sweep goes on with the others.
func TestTTLSweepSkipsABrokenThread(t *testing.T) {
	e, clk := ttlEngine(t, TTLConfig{DefaultTTL: 10})
	var ids []string
	for range 3 {
		th, err := e.CreateThread("", nil, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := e.SetThreadTTL(th.ThreadID, nil); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, th.ThreadID)
	}
	if err := e.DB.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bThreads)).Put([]byte(ids[0]), []byte(`{"thread_id": 7}`))
	}); err != nil {
		t.Fatal(err)
	}
	clk.Set("2026-03-01T10:10:00Z")
	n, err := e.SweepTTL()
	if n != 2 || err == nil || !strings.Contains(err.Error(), ids[0]) {
		t.Fatalf("sweep: %d %v, want 2 and an error naming %s", n, err, ids[0])
	}
	if idx := ttlIndex(t, e); len(idx) != 1 || !strings.HasSuffix(idx[0], ids[0]) {
		t.Fatalf("TTL index %v, want the broken thread's entry only", idx)
	}
}
