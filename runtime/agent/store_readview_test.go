package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// pendingThread builds a thread whose records are partly committed and
// partly journaled: three runs admitted, one cancelled and one deleted
// (both committed), then two more admitted after the last commit.
func pendingThread(t *testing.T, e *Engine) (thread string, runs []string) {
	t.Helper()
	th, err := e.CreateThread("", map[string]any{"graph_id": "echo", "k": "v"}, "")
	if err != nil {
		t.Fatal(err)
	}
	admit := func() string {
		r, _, err := e.CreateRun(th.ThreadID, RunCreate{AssistantID: "echo", Input: map[string]any{"messages": []any{"hi"}},
			AfterSeconds: 3600, MultitaskStrategy: StrategyEnqueue, Metadata: map[string]any{"n": len(runs)}})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r.RunID)
		return r.RunID
	}
	admit()
	cancelled, deleted := admit(), admit()
	for _, run := range []string{cancelled, deleted} {
		if err := e.Cancel(context.Background(), th.ThreadID, run, StrategyInterrupt, "", false); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.DeleteRun(th.ThreadID, deleted); err != nil {
		t.Fatal(err)
	}
	flushJournal(t, e)
	admit()
	admit()
	return th.ThreadID, runs
}

func flushJournal(t *testing.T, e *Engine) {
	t.Helper()
	if err := e.bolt().w.Update(func(*bolt.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// TestOneThreadViewLaysJournaledRows: a one-thread read of a thread with
// journaled rows reads in a read transaction with those rows laid over it
// in memory, and every read a one-thread view makes answers what it
// answers once the rows are committed.
func TestOneThreadViewLaysJournaledRows(t *testing.T) {
	r := &restartable{t: t, path: filepath.Join(t.TempDir(), "agent.db")}
	e := r.start()
	defer r.crash()
	id, runs := pendingThread(t, e)
	s := e.bolt()
	if !s.pend.pending(id) {
		t.Fatal("nothing journaled: the test reads nothing laid over")
	}
	asJSON := func(v any, err error) string {
		raw, _ := json.Marshal(v)
		return fmt.Sprintf("%s %v", raw, err)
	}
	missing := "00000000-0000-7000-8000-000000000000"
	reads := []struct {
		name string
		read func(tx ReadTx) string
	}{
		{"GetThread", func(tx ReadTx) string { return asJSON(tx.GetThread(id)) }},
		{"GetThread of a missing thread", func(tx ReadTx) string { return asJSON(tx.GetThread(missing)) }},
		{"ThreadExists", func(tx ReadTx) string { return fmt.Sprint(tx.ThreadExists(id), tx.ThreadExists(missing)) }},
		{"ThreadQueue", func(tx ReadTx) string { a, q, err := tx.ThreadQueue(id); return fmt.Sprint(a, q, err) }},
		{"ThreadGraph", func(tx ReadTx) string { g, md, err := tx.ThreadGraph(id); return asJSON([]any{g, md}, err) }},
		{"GetRun", func(tx ReadTx) string {
			out := ""
			for _, run := range runs {
				out += asJSON(tx.GetRun(run)) + "\n"
			}
			return out
		}},
		{"RunNotBefore", func(tx ReadTx) string {
			out := ""
			for _, run := range runs {
				out += asJSON(tx.RunNotBefore(run)) + "\n"
			}
			return out
		}},
		{"ThreadRunIDs", func(tx ReadTx) string { return asJSON(tx.ThreadRunIDs(id)) }},
		{"EachThreadRunNewest", func(tx ReadTx) string {
			var seen []string
			err := tx.EachThreadRunNewest(id, func(r *runRecord) bool { seen = append(seen, r.RunID+" "+r.Status); return true })
			return fmt.Sprint(seen, err)
		}},
		{"EachThreadRunNewest stopped after one", func(tx ReadTx) string {
			var seen []string
			err := tx.EachThreadRunNewest(id, func(r *runRecord) bool { seen = append(seen, r.RunID); return false })
			return fmt.Sprint(seen, err)
		}},
	}
	view := func(read func(ReadTx) string) (got string, laid bool) {
		if err := s.ViewThread(context.Background(), id, func(tx ReadTx) error {
			got, laid = read(tx), tx.(*boltTx).over != nil
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return got, laid
	}
	journaled := make([]string, len(reads))
	for i, rd := range reads {
		got, laid := view(rd.read)
		if !laid {
			t.Fatalf("%s: the view laid no journaled rows over bbolt", rd.name)
		}
		journaled[i] = got
	}
	// The same thread read through the engine, journaled and committed.
	engineReads := func() string {
		th, err1 := e.GetThread(id)
		list, err2 := e.ListRuns(id, 10, 0, "")
		run, err3 := e.GetRun(id, runs[0])
		return asJSON([]any{th, list, run}, fmt.Errorf("%v %v %v", err1, err2, err3))
	}
	beforeCommit := engineReads()

	flushJournal(t, e)
	if s.pend.pending(id) {
		t.Fatal("the flush left rows journaled")
	}
	for i, rd := range reads {
		t.Run(rd.name, func(t *testing.T) {
			committed, laid := view(rd.read)
			if laid {
				t.Fatal("a committed thread's view laid rows over bbolt")
			}
			if journaled[i] != committed {
				t.Fatalf("journaled rows laid over bbolt read\n%s\ncommitted\n%s", journaled[i], committed)
			}
		})
	}
	if after := engineReads(); beforeCommit != after {
		t.Fatalf("the engine read\n%s\nbefore the commit, and\n%s\nafter", beforeCommit, after)
	}
}

// TestOneThreadViewTakesNoWriterLock: a thread's reads go on while a
// commit holds bbolt's writer lock (the flusher's fdatasync, once per
// flush), where they used to queue behind it.
func TestOneThreadViewTakesNoWriterLock(t *testing.T) {
	r := &restartable{t: t, path: filepath.Join(t.TempDir(), "agent.db")}
	e := r.start()
	defer r.crash()
	id, runs := pendingThread(t, e)
	tx, err := e.DB.Begin(true)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.GetRun(id, runs[1])
		if err == nil {
			_, err = e.ListRuns(id, 10, 0, "")
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a one-thread read waited for the writer lock")
	}
	_ = tx.Rollback()
}

// TestReadAtBeginsAgainAfterASettle: records a commit settles after a
// read transaction began are in neither the transaction's snapshot nor
// the pending list; the read must see that and begin again.
func TestReadAtBeginsAgainAfterASettle(t *testing.T) {
	r := &restartable{t: t, path: filepath.Join(t.TempDir(), "agent.db")}
	e := r.start()
	defer r.crash()
	id, _ := pendingThread(t, e)
	s := e.bolt()
	old, err := e.DB.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = old.Rollback() }()
	h := horizon(old)
	if ops, ok := s.pend.sinceRead(h, id); !ok || len(ops) == 0 {
		t.Fatalf("before the commit: %d records, %v; want some, true", len(ops), ok)
	}
	flushJournal(t, e)
	if _, ok := s.pend.sinceRead(h, id); ok {
		t.Fatal("a snapshot older than the commit got the pending list, without the records the commit took")
	}
	var got []*wbOp
	begun := 0
	if err := s.readAt(id, func(tx *bolt.Tx, ops []*wbOp) error {
		begun++
		if horizon(tx) <= h {
			t.Errorf("readAt read a snapshot older than the commit")
		}
		got = ops
		return nil
	}); err != nil || begun != 1 || len(got) != 0 {
		t.Fatalf("readAt after the commit: %d records, begun %d times, %v", len(got), begun, err)
	}
}

// TestJournaledBucketsAreLaidOrRefused: every bucket a journaled write
// puts rows in is one a one-thread view lays over bbolt, the checkpoint
// rows (with their own reader), or a thread index, which a one-thread
// view refuses to read (wholeDB). A new journaled bucket must join one.
func TestJournaledBucketsAreLaidOrRefused(t *testing.T) {
	r := &restartable{t: t, path: filepath.Join(t.TempDir(), "agent.db")}
	e := r.start()
	defer r.crash()
	id, _ := pendingThread(t, e)
	known := slices.Concat(threadViewBuckets, threadIndexBuckets, []string{bLG})
	seen := map[string]bool{}
	for _, op := range e.bolt().pend.since(0, "") {
		for _, row := range op.rows {
			seen[row.bucket] = true
		}
	}
	if !seen[bThreads] || !seen[bRuns] || !seen[bThreadRuns] {
		t.Fatalf("journaled buckets %v: the workload journaled less than the test expects (thread %s)", seen, id)
	}
	for b := range seen {
		if !slices.Contains(known, b) {
			t.Errorf("journaled rows of bucket %q, which a one-thread view neither lays over bbolt nor refuses", b)
		}
	}
}
