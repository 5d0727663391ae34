package agent

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

// restartable is an engine on a database path that a test can stop as a
// crash would (no run ends, nothing flushed) and start again.
type restartable struct {
	t      *testing.T
	path   string
	e      *Engine
	cancel context.CancelFunc
}

func (r *restartable) start() *Engine {
	r.t.Helper()
	db, err := storage.Open(r.path, time.Second, Migrations)
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	// No flush on a timer: the test decides when bbolt gets the rows.
	e := &Engine{DB: db, Graphs: map[string]Graph{"echo": Echo{}}, Workers: 1, Timeout: time.Minute, Log: zerolog.Nop(),
		FlushEvery: time.Hour}
	if err := e.Start(ctx); err != nil {
		cancel()
		db.Close()
		r.t.Fatal(err)
	}
	r.e, r.cancel = e, cancel
	return e
}

func (r *restartable) crash() {
	r.cancel()
	r.e.Wait()
	r.e.bolt().pend.j.Close()
	r.e.DB.Close()
}

// bboltIDs lists the thread's checkpoint ids in bbolt itself, without
// flushing the journal first.
func bboltIDs(t *testing.T, e *Engine, thread string) []string {
	t.Helper()
	var ids []string
	if err := e.DB.View(func(tx *bolt.Tx) error {
		r, err := reader(tx, "", nil)
		if err != nil {
			return err
		}
		list, err := listTuples(r, &cpQuery{ThreadID: &thread})
		for _, c := range list {
			ids = append(ids, c.CheckpointID)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestJournaledCheckpoints: the running run's writes are journaled (not in
// bbolt until read or until the run ends), read back by the host as if
// stored, replayed after a crash while the run still holds its thread, and
// not replayed once the run has ended, so a rollback stays rolled back.
func TestJournaledCheckpoints(t *testing.T) {
	r := &restartable{t: t, path: filepath.Join(t.TempDir(), "agent.db")}
	e := r.start()
	th, err := e.CreateThread("", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	thread := th.ThreadID
	setActive := func(e *Engine, run string) {
		if err := e.bolt().w.Update(func(tx *bolt.Tx) error {
			rec, err := (&boltTx{tx: tx}).GetThread(thread)
			if err != nil {
				return err
			}
			rec.Active = run
			return putJSON(tx.Bucket([]byte(bThreads)), thread, rec)
		}); err != nil {
			t.Fatal(err)
		}
	}
	cp := func(e *Engine, id, run string) error {
		p := put(id, "", run, map[string]string{"x": id})
		p["thread_id"] = thread
		_, err := call(t, e, "cp.put", p)
		return err
	}
	latest := func(e *Engine) string {
		raw, err := call(t, e, "cp.getTuple", map[string]any{"thread_id": thread, "checkpoint_ns": ""})
		if err != nil {
			t.Fatal(err)
		}
		if string(raw) == "null" {
			return ""
		}
		var tup cpTuple
		if err := json.Unmarshal(raw, &tup); err != nil {
			t.Fatal(err)
		}
		return tup.CheckpointID
	}

	setActive(e, "r1")
	e.bolt().pend.own(thread, "r1")
	for _, id := range []string{"1a", "1b"} {
		if err := cp(e, id, "r1"); err != nil {
			t.Fatal(err)
		}
	}
	if ids := bboltIDs(t, e, thread); len(ids) != 0 {
		t.Fatalf("journaled writes already in bbolt: %v", ids)
	}
	if got := latest(e); got != "1b" {
		t.Fatalf("host reads %q, want 1b", got)
	}
	if ids := bboltIDs(t, e, thread); len(ids) != 0 {
		t.Fatalf("a read committed the journaled writes: %v", ids)
	}
	if err := cp(e, "1c", "r1"); err != nil {
		t.Fatal(err)
	}

	// A crash while r1 runs: its last write comes back from the journal.
	r.crash()
	e = r.start()
	if ids := bboltIDs(t, e, thread); len(ids) != 3 || ids[0] != "1c" {
		t.Fatalf("after replay: %v", ids)
	}

	// r1 runs again, writes, and is rolled back by the transaction that
	// ends it; the journal still holds the write, which must not return.
	e.bolt().pend.own(thread, "r1")
	if err := cp(e, "1d", "r1"); err != nil {
		t.Fatal(err)
	}
	// bbolt's rows and the journaled one read as one list.
	raw, err := call(t, e, "cp.list", map[string]any{"thread_id": thread})
	if err != nil {
		t.Fatal(err)
	}
	var list []cpTuple
	if err := json.Unmarshal(raw, &list); err != nil || len(list) != 4 || list[0].CheckpointID != "1d" || list[3].CheckpointID != "1a" {
		t.Fatalf("list over bbolt and the journal: %s (%v)", raw, err)
	}
	if got := latest(e); got != "1d" {
		t.Fatalf("host reads %q, want 1d", got)
	}
	e.bolt().pend.disown(thread)
	if err := e.bolt().w.Update(func(tx *bolt.Tx) error {
		rec, err := (&boltTx{tx: tx}).GetThread(thread)
		if err != nil {
			return err
		}
		rec.Active = ""
		if err := putJSON(tx.Bucket([]byte(bThreads)), thread, rec); err != nil {
			return err
		}
		return deleteLG(&boltTx{tx: tx}, thread, "r1")
	}); err != nil {
		t.Fatal(err)
	}
	if ids := bboltIDs(t, e, thread); len(ids) != 0 {
		t.Fatalf("after the rollback: %v", ids)
	}
	// A late write of the ended run is fenced, not journaled.
	if err := cp(e, "1e", "r1"); !errors.Is(err, ErrFenced) {
		t.Fatalf("late write after the end: %v", err)
	}
	r.crash()
	e = r.start()
	if ids := bboltIDs(t, e, thread); len(ids) != 0 {
		t.Fatalf("replay brought back rolled-back rows: %v", ids)
	}
	if recs, err := storage.ReadJournal(r.path + ".journal"); err != nil || len(recs) != 0 {
		t.Fatalf("journal after a replayed start: %d records, %v", len(recs), err)
	}
	r.crash()
}

// TestLGReadMerge: rows laid over bbolt's read in key order, an overlay
// row replacing the stored one under the same key, within the prefix only.
func TestLGReadMerge(t *testing.T) {
	db, err := storage.Open(filepath.Join(t.TempDir(), "agent.db"), time.Second, Migrations)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, k := range []string{"a/1", "a/3", "a/5", "b/1"} {
			if err := tx.Bucket([]byte(bLG)).Put([]byte(k), []byte("bolt")); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		over       []string
		prefix     string
		want, last string
	}{
		{"no overlay", nil, "a/", "a/1=bolt a/3=bolt a/5=bolt", "a/5=bolt"},
		{"interleaved", []string{"a/2", "a/6"}, "a/", "a/1=bolt a/2=over a/3=bolt a/5=bolt a/6=over", "a/6=over"},
		{"same key", []string{"a/3", "a/0"}, "a/", "a/0=over a/1=bolt a/3=over a/5=bolt", "a/5=bolt"},
		{"last is stored", []string{"a/4"}, "a/", "a/1=bolt a/3=bolt a/4=over a/5=bolt", "a/5=bolt"},
		{"other prefix untouched", []string{"b/0", "c/1"}, "a/", "a/1=bolt a/3=bolt a/5=bolt", "a/5=bolt"},
		{"overlay only", []string{"c/1", "c/2"}, "c/", "c/1=over c/2=over", "c/2=over"},
		{"nothing", nil, "z/", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_ = db.View(func(tx *bolt.Tx) error {
				r := &rowsRead{b: boltBase{tx.Bucket([]byte(bLG))}, over: map[string][]byte{}}
				for _, k := range c.over {
					r.over[k] = []byte("over")
					r.keys = append(r.keys, k)
				}
				slices.Sort(r.keys)
				var got []string
				r.scan([]byte(c.prefix), func(k, v []byte) bool {
					got = append(got, string(k)+"="+string(v))
					return true
				})
				if strings.Join(got, " ") != c.want {
					t.Errorf("scan %q: %q, want %q", c.prefix, strings.Join(got, " "), c.want)
				}
				k, v := r.last([]byte(c.prefix))
				last := ""
				if k != nil {
					last = string(k) + "=" + string(v)
				}
				if last != c.last {
					t.Errorf("last %q: %q, want %q", c.prefix, last, c.last)
				}
				return nil
			})
		})
	}
}

// TestJournalOpRoundTrip: a record decodes to the op it encodes; a
// truncated or extended one is refused.
func TestJournalOpRoundTrip(t *testing.T) {
	op := &wbOp{seq: 7, thread: "t", rows: []wbRow{{bLG, rowPut, []byte("k1"), []byte("v1")}, {bThreadRuns, rowPutNew, []byte("k2"), nil},
		{bThreads, rowDelete, []byte{0, 1}, nil}}}
	b := op.encode()
	got, err := decodeOp(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.seq != 7 || got.thread != "t" || len(got.rows) != 3 || string(got.rows[2].key) != "\x00\x01" || got.rows[1].mode != rowPutNew ||
		got.rows[1].bucket != bThreadRuns || got.rows[2].mode != rowDelete {
		t.Fatalf("decoded %+v", got)
	}
	for _, bad := range [][]byte{nil, b[:len(b)-1], append(append([]byte{}, b...), 0), append([]byte{9}, b[1:]...)} {
		if _, err := decodeOp(bad); err == nil {
			t.Fatalf("decoded a malformed record %q", bad)
		}
	}
}

func FuzzDecodeJournalOp(f *testing.F) {
	f.Add((&wbOp{seq: 1, thread: "t", rows: []wbRow{{bLG, rowPut, []byte("k"), []byte("v")}}}).encode())
	f.Add([]byte{2, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		op, err := decodeOp(b)
		if err != nil {
			return
		}
		again, err := decodeOp(op.encode())
		if err != nil || again.seq != op.seq || again.thread != op.thread || len(again.rows) != len(op.rows) {
			t.Fatalf("re-encoded record does not decode the same: %v", err)
		}
	})
}

// TestHotWritesReplay: a thread's creation and a run's admission are
// acknowledged from the journal, read back before bbolt has them, survive
// a crash before any commit, and a later bbolt commit that changed the
// thread is not undone by the replay of the older record.
func TestHotWritesReplay(t *testing.T) {
	r := &restartable{t: t, path: filepath.Join(t.TempDir(), "agent.db")}
	e := r.start()
	inBbolt := func(e *Engine, bucket, key string) bool {
		var ok bool
		_ = e.DB.View(func(tx *bolt.Tx) error {
			ok = tx.Bucket([]byte(bucket)).Get([]byte(key)) != nil
			return nil
		})
		return ok
	}
	th, err := e.CreateThread("", map[string]any{"a": 1.0}, "")
	if err != nil {
		t.Fatal(err)
	}
	id := th.ThreadID
	if inBbolt(e, bThreads, id) {
		t.Fatal("the creation was committed to bbolt; want it journaled")
	}
	if got, err := e.GetThread(id); err != nil || got.Metadata["a"] != 1.0 {
		t.Fatalf("read back: %+v, %v", got, err)
	}
	// A run that waits (after_seconds): admitted, not started.
	run, _, err := e.CreateRun(id, RunCreate{AssistantID: "echo", Input: map[string]any{"messages": []any{"hi"}}, AfterSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	if inBbolt(e, bRuns, run.RunID) {
		t.Fatal("the admission was committed to bbolt; want it journaled")
	}
	if got, err := e.GetRun(id, run.RunID); err != nil || got.Status != RunPending {
		t.Fatalf("run read back: %+v, %v", got, err)
	}
	if runs, err := e.ListRuns(id, 10, 0, ""); err != nil || len(runs) != 1 {
		t.Fatalf("runs listed: %v, %v", runs, err)
	}

	// A crash before any commit: the journal brings both back.
	r.crash()
	e = r.start()
	if !inBbolt(e, bThreads, id) || !inBbolt(e, bRuns, run.RunID) {
		t.Fatal("the journaled creation and admission were not replayed")
	}
	if got, err := e.GetRun(id, run.RunID); err != nil || got.Status != RunPending {
		t.Fatalf("run after replay: %+v, %v", got, err)
	}

	// A bbolt commit (the patch) takes the thread's journaled record with
	// it; the replay after the next crash must not apply it again over
	// the patch.
	th2, err := e.CreateThread("", map[string]any{"a": 1.0}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.PatchThread(th2.ThreadID, map[string]any{"b": 2.0}); err != nil {
		t.Fatal(err)
	}
	r.crash()
	e = r.start()
	got, err := e.GetThread(th2.ThreadID)
	if err != nil || got.Metadata["a"] != 1.0 || got.Metadata["b"] != 2.0 {
		t.Fatalf("after the patch and a replay: %+v, %v", got.Metadata, err)
	}
	r.crash()
}

// bolt is the engine's bbolt store, for tests that reach its committer
// and journal.
func (e *Engine) bolt() *boltStore { return e.store.(*boltStore) }

// TestJournaledUnitsSkipPendingCheckpointRows: a journaled unit of work
// and a one-thread read lay the thread's pending records over bbolt
// without its checkpoint rows (most of a run's pending bytes), so a
// journaled unit may not scan them (errNotHot sends it to a commit, which
// holds them); the checkpoint reader and a commit still see them.
func TestJournaledUnitsSkipPendingCheckpointRows(t *testing.T) {
	r := &restartable{t: t, path: filepath.Join(t.TempDir(), "agent.db")}
	e := r.start()
	defer r.crash()
	ctx := context.Background()
	th, err := e.CreateThread("", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	id, s := th.ThreadID, e.bolt()
	key := lgKey(id, "", lgKindBlob, "ch", "v1")
	s.OpenFence(id, "run-1")
	if err := s.PutCheckpointRows(ctx, id, "run-1", []cpRow{{rowPut, key, []byte("value")}}); err != nil {
		t.Fatal(err)
	}
	if !s.pend.pending(id) {
		t.Fatal("the checkpoint row was committed; want it journaled")
	}
	scan := func(tx Tx) (n int, err error) {
		err = tx.ScanCheckpointRows(lgKey(id, ""), func(_, _ []byte) bool { n++; return true })
		return n, err
	}
	err = s.UpdateThread(ctx, id, false, func(tx Tx) error { _, err := scan(tx); return err })
	if !errors.Is(err, errNotHot) {
		t.Fatalf("a journaled unit scanned checkpoint rows: %v, want errNotHot", err)
	}
	var seen []byte
	if err := s.ViewCheckpointRows(ctx, id, func(lg checkpointRows) error { seen = lg.get(key); return nil }); err != nil || string(seen) != "value" {
		t.Fatalf("checkpoint reader: %q, %v", seen, err)
	}
	var n int
	if err := s.Update(ctx, func(tx Tx) error { n, err = scan(tx); return err }); err != nil || n != 1 {
		t.Fatalf("a commit scanned %d rows (%v), want 1", n, err)
	}
}

// TestOverlaidBuckets: a journaled write lays a thread's pending rows over
// bbolt but its checkpoint rows and its index rows (the attributes row
// excepted, which a thread's write reads to replace the others).
func TestOverlaidBuckets(t *testing.T) {
	for _, tc := range []struct {
		bucket string
		want   bool
	}{
		{bThreads, true}, {bRuns, true}, {bThreadRuns, true}, {bThreadsAttr, true},
		{bLG, false}, {bThreadsCreated, false}, {bThreadsUpdated, false}, {bThreadsStatus, false},
		{bThreadsMeta, false}, {bThreadsBusy, false}, {bThreadsCount, false},
	} {
		if got := overlaid(tc.bucket); got != tc.want {
			t.Errorf("overlaid(%q) = %v, want %v", tc.bucket, got, tc.want)
		}
	}
}
