package agent

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
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
	e := &Engine{DB: db, Graphs: map[string]Graph{"echo": Echo{}}, Workers: 1, Timeout: time.Minute, Log: zerolog.Nop()}
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
	r.e.pend.j.Close()
	r.e.DB.Close()
}

// bboltIDs lists the thread's checkpoint ids in bbolt itself, without
// flushing the journal first.
func bboltIDs(t *testing.T, e *Engine, thread string) []string {
	t.Helper()
	var ids []string
	if err := e.DB.View(func(tx *bolt.Tx) error {
		list, err := listTuples(tx, &cpQuery{ThreadID: &thread})
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
		if err := e.w.Update(func(tx *bolt.Tx) error {
			rec, err := getThread(tx, thread)
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
	e.pend.own(thread, "r1")
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
	if ids := bboltIDs(t, e, thread); len(ids) != 2 {
		t.Fatalf("a read did not move the journaled writes into bbolt: %v", ids)
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
	e.pend.own(thread, "r1")
	if err := cp(e, "1d", "r1"); err != nil {
		t.Fatal(err)
	}
	if err := e.updateLG(thread, true, func(tx *bolt.Tx) error {
		rec, err := getThread(tx, thread)
		if err != nil {
			return err
		}
		rec.Active = ""
		if err := putJSON(tx.Bucket([]byte(bThreads)), thread, rec); err != nil {
			return err
		}
		return deleteLG(tx, thread, "r1")
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

// TestJournalOpRoundTrip: a record decodes to the op it encodes; a
// truncated or extended one is refused.
func TestJournalOpRoundTrip(t *testing.T) {
	op := &lgOp{thread: "t", run: "r", rows: []lgRow{{rowPut, []byte("k1"), []byte("v1")}, {rowPutNew, []byte("k2"), nil}, {rowPutChanged, []byte{0, 1}, []byte("x")}}}
	b := op.encode()
	got, err := decodeOp(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.thread != "t" || got.run != "r" || len(got.rows) != 3 || string(got.rows[2].key) != "\x00\x01" || got.rows[1].mode != rowPutNew {
		t.Fatalf("decoded %+v", got)
	}
	for _, bad := range [][]byte{nil, b[:len(b)-1], append(append([]byte{}, b...), 0), append([]byte{9}, b[1:]...)} {
		if _, err := decodeOp(bad); err == nil {
			t.Fatalf("decoded a malformed record %q", bad)
		}
	}
}

func FuzzDecodeJournalOp(f *testing.F) {
	f.Add((&lgOp{thread: "t", run: "r", rows: []lgRow{{rowPut, []byte("k"), []byte("v")}}}).encode())
	f.Add([]byte{1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		op, err := decodeOp(b)
		if err != nil {
			return
		}
		again, err := decodeOp(op.encode())
		if err != nil || again.thread != op.thread || again.run != op.run || len(again.rows) != len(op.rows) {
			t.Fatalf("re-encoded record does not decode the same: %v", err)
		}
	})
}
