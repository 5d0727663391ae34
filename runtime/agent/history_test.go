package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
)

// historyCheckpoints is how long the thread of the history tests is: long
// enough that reading it whole is far from reading a page.
const historyCheckpoints = 2000

// builtinThread writes n checkpoints of the engine's own kind on a new
// thread through the store (the echo graph writes one per step), the odd
// ones tagged {"odd": true}; it returns the thread and the checkpoints'
// ids, oldest first.
func builtinThread(t *testing.T, e *Engine, n int) (string, []string) {
	t.Helper()
	th, err := e.CreateThread("", map[string]any{"graph_id": "echo"}, "")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := 0; i < n; i += 100 {
		err := e.store.Update(context.Background(), func(tx Tx) error {
			rec, err := tx.GetThread(th.ThreadID)
			if err != nil {
				return err
			}
			for j := i; j < min(i+100, n); j++ {
				cp, err := writeCheckpoint(tx, rec, map[string]any{"n": j}, "loop", j, nil, nil)
				if err != nil {
					return err
				}
				if j%2 == 1 {
					cp.Metadata["odd"] = true
					if err := tx.PutCheckpoint(th.ThreadID, rec.Seq, &cp); err != nil {
						return err
					}
				}
				ids = append(ids, cp.Checkpoint.CheckpointID)
			}
			return tx.PutThread(rec)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return th.ThreadID, ids
}

// TestHistoryReadsOnlyItsPage: a page of a long built-in-graph thread's
// history (limit, before, a metadata filter) holds the right checkpoints,
// newest first, and reads about as many checkpoint rows as it returns,
// not the thread's whole history.
func TestHistoryReadsOnlyItsPage(t *testing.T) { testHistoryReadsOnlyItsPage(t, startEngine) }

func testHistoryReadsOnlyItsPage(t *testing.T, start func(*testing.T) *Engine) {
	e := start(t)
	id, ids := builtinThread(t, e, historyCheckpoints)
	newest := func(from, n, step int) []string { // ids[from], ids[from-step], ... n of them
		var out []string
		for i := from; i >= 0 && len(out) < n; i -= step {
			out = append(out, ids[i])
		}
		return out
	}
	last := len(ids) - 1
	for _, tc := range []struct {
		name   string
		q      HistoryQuery
		want   []string
		maxRow int64 // rows decoded; a seek costs O(log n) references
	}{
		{"limit", HistoryQuery{Limit: 10}, newest(last, 10, 1), 10},
		{"before the newest", HistoryQuery{Limit: 10, Before: ids[last]}, newest(last-1, 10, 1), 10 + 2*11},
		{"before, deep", HistoryQuery{Limit: 10, Before: ids[500]}, newest(499, 10, 1), 10 + 2*11},
		{"before the oldest", HistoryQuery{Limit: 10, Before: ids[0]}, nil, 2 * 11},
		{"before, unknown id", HistoryQuery{Limit: 10, Before: uuid.NewString()}, nil, historyCheckpoints + 2*11},
		{"filter", HistoryQuery{Limit: 5, Filter: map[string]any{"odd": true}}, newest(last, 5, 2), 10},
		{"filter and before", HistoryQuery{Limit: 5, Before: ids[1001], Filter: map[string]any{"odd": true}}, newest(999, 5, 2), 10 + 2*11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := checkpointRowsRead.Load()
			got, err := e.HistoryQuery(id, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			read := checkpointRowsRead.Load() - before
			var gotIDs []string
			for _, cp := range got {
				gotIDs = append(gotIDs, cp.Checkpoint.CheckpointID)
			}
			if fmt.Sprint(gotIDs) != fmt.Sprint(tc.want) {
				t.Fatalf("history = %v, want %v", gotIDs, tc.want)
			}
			if read > tc.maxRow {
				t.Errorf("read %d checkpoint rows for a page of %d (at most %d)", read, len(got), tc.maxRow)
			}
		})
	}
	// Paging with before walks the whole history once, in order.
	var walked []string
	q := HistoryQuery{Limit: 300}
	for {
		page, err := e.HistoryQuery(id, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, cp := range page {
			walked = append(walked, cp.Checkpoint.CheckpointID)
		}
		q.Before = page[len(page)-1].Checkpoint.CheckpointID
	}
	if fmt.Sprint(walked) != fmt.Sprint(newest(last, len(ids), 1)) {
		t.Fatalf("paging walked %d checkpoints, not the %d of the thread newest first", len(walked), len(ids))
	}
}

// TestHostHistoryReadsOnlyItsPage: the host's checkpointer listing one
// namespace of a thread with a limit (a history page) returns the newest
// checkpoints by id and visits only as many rows as it returns.
func TestHostHistoryReadsOnlyItsPage(t *testing.T) { testHostHistoryReadsOnlyItsPage(t, startEngine) }

func testHostHistoryReadsOnlyItsPage(t *testing.T, start func(*testing.T) *Engine) {
	e := start(t)
	var ids []string
	for i := 0; i < historyCheckpoints; i++ {
		// Ids sort as they are written, as UUIDv6 do; blobs and writes
		// sort beside the checkpoints in the thread's rows.
		id := fmt.Sprintf("1f0-%06d", i)
		p := put(id, "", "", map[string]string{"a": fmt.Sprint(i)})
		p["metadata_json"] = map[string]any{"odd": i%2 == 1}
		if _, err := call(t, e, "cp.put", p); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	newest := func(from, n, step int) []string {
		var out []string
		for i := from; i >= 0 && len(out) < n; i -= step {
			out = append(out, ids[i])
		}
		return out
	}
	last := len(ids) - 1
	for _, tc := range []struct {
		name string
		q    map[string]any
		want []string
		rows int64
	}{
		{"limit", map[string]any{"limit": 10}, newest(last, 10, 1), 10},
		{"before", map[string]any{"limit": 10, "before": ids[700]}, newest(699, 10, 1), 10},
		{"filter", map[string]any{"limit": 5, "filter": map[string]any{"odd": true}}, newest(last, 5, 2), 10},
		{"no limit", map[string]any{"before": ids[3]}, newest(2, 3, 1), 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := map[string]any{"thread_id": "t1", "checkpoint_ns": ""}
			for k, v := range tc.q {
				q[k] = v
			}
			before := lgRowsVisited.Load()
			got := listCheckpoints(t, e, q)
			visited := lgRowsVisited.Load() - before
			var gotIDs []string
			for _, tu := range got {
				gotIDs = append(gotIDs, tu.CheckpointID)
				if len(tu.Blobs) != 1 {
					t.Fatalf("checkpoint %s has %d channel values, want 1", tu.CheckpointID, len(tu.Blobs))
				}
			}
			if fmt.Sprint(gotIDs) != fmt.Sprint(tc.want) {
				t.Fatalf("list = %v, want %v", gotIDs, tc.want)
			}
			if visited > tc.rows {
				t.Errorf("visited %d rows for a page of %d (at most %d)", visited, len(got), tc.rows)
			}
		})
	}
}

// TestLGScanBack: the reverse scan over bbolt's rows with journaled rows
// laid over them (replaced, deleted, added) yields what the forward scan
// yields, reversed, below any bound.
func TestLGScanBack(t *testing.T) { testLGScanBack(t, startEngine) }

func testLGScanBack(t *testing.T, start func(*testing.T) *Engine) {
	e := start(t)
	err := e.DB.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bLG))
		for _, k := range []string{"p1", "p3", "p4", "p6", "q0", "o9"} {
			if err := b.Put([]byte(k), []byte("bolt "+k)); err != nil {
				return err
			}
		}
		r := &rowsRead{b: boltBase{b}, over: map[string][]byte{"p3": []byte("over p3"), "p4": nil, "p2": []byte("over p2"), "p7": []byte("over p7")}}
		for k := range r.over {
			r.keys = append(r.keys, k)
		}
		slices.Sort(r.keys)
		var fwd []string
		r.scan([]byte("p"), func(k, v []byte) bool { fwd = append(fwd, string(k)+"="+string(v)); return true })
		if want := "[p1=bolt p1 p2=over p2 p3=over p3 p6=bolt p6 p7=over p7]"; fmt.Sprint(fwd) != want {
			t.Fatalf("scan = %v, want %s", fwd, want)
		}
		for _, below := range []string{"", "p0", "p1", "p2", "p3", "p35", "p4", "p6", "p7", "p8", "q"} {
			var want []string
			for _, kv := range slices.Backward(fwd) {
				if below == "" || kv[:2] < below {
					want = append(want, kv)
				}
			}
			var b []byte
			if below != "" {
				b = []byte(below)
			}
			var got []string
			r.scanBack([]byte("p"), b, func(k, v []byte) bool { got = append(got, string(k)+"="+string(v)); return true })
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("scanBack below %q = %v, want %v", below, got, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestHistoryBeforeUnorderedIDs: checkpoint ids out of step with their
// numbers (a clock stepped back) defeat the binary search for before;
// the scan behind it still finds each page.
func TestHistoryBeforeUnorderedIDs(t *testing.T) { testHistoryBeforeUnorderedIDs(t, startEngine) }

func testHistoryBeforeUnorderedIDs(t *testing.T, start func(*testing.T) *Engine) {
	e := start(t)
	id, ids := builtinThread(t, e, 1) // oldest first
	err := e.store.Update(context.Background(), func(tx Tx) error {
		rec, err := tx.GetThread(id)
		if err != nil {
			return err
		}
		for i := 0; i < 50; i++ {
			cp, err := writeCheckpoint(tx, rec, map[string]any{"n": i}, "loop", i, nil, nil)
			if err != nil {
				return err
			}
			cp.Checkpoint.CheckpointID = uuid.NewString() // random: unordered
			if err := tx.PutCheckpoint(id, rec.Seq, &cp); err != nil {
				return err
			}
			ids = append(ids, cp.Checkpoint.CheckpointID)
		}
		return tx.PutThread(rec)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []int{50, 30, 7, 2, 1} {
		got, err := e.HistoryQuery(id, HistoryQuery{Limit: 3, Before: ids[at]})
		if err != nil {
			t.Fatal(err)
		}
		var gotIDs, want []string
		for _, cp := range got {
			gotIDs = append(gotIDs, cp.Checkpoint.CheckpointID)
		}
		for i := at - 1; i >= 0 && len(want) < 3; i-- {
			want = append(want, ids[i])
		}
		if fmt.Sprint(gotIDs) != fmt.Sprint(want) {
			t.Errorf("before #%d: %v, want %v", at, gotIDs, want)
		}
	}
}

// TestStateAtCheckpointSeeks: the state at a checkpoint of a long
// built-in-graph thread is found by a seek on its id (O(log n) rows
// read), and an unknown id is not found.
func TestStateAtCheckpointSeeks(t *testing.T) { testStateAtCheckpointSeeks(t, startEngine) }

func testStateAtCheckpointSeeks(t *testing.T, start func(*testing.T) *Engine) {
	e := start(t)
	id, ids := builtinThread(t, e, historyCheckpoints)
	for _, at := range []int{0, 500, historyCheckpoints - 1} {
		before := checkpointRowsRead.Load()
		cp, err := e.GetState(id, ids[at])
		if err != nil {
			t.Fatal(err)
		}
		if read := checkpointRowsRead.Load() - before; read > 2*11+1 {
			t.Errorf("state at #%d read %d checkpoint rows", at, read)
		}
		if cp.Checkpoint.CheckpointID != ids[at] || fmt.Sprint(cp.Values["n"]) != fmt.Sprint(at) {
			t.Errorf("state at #%d: %s %v", at, cp.Checkpoint.CheckpointID, cp.Values)
		}
	}
	if _, err := e.GetState(id, uuid.NewString()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown checkpoint: %v, want ErrNotFound", err)
	}
}
