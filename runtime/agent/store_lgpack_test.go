package agent

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

// lgReads records what every read of checkpoint rows returns through
// reader(tx, thread, nil): scans, backward scans (whole and stopped early),
// the last row and single gets, over prefixes at every level of the key.
func lgReads(t *testing.T, tx *bolt.Tx, thread string, threads []string) []string {
	t.Helper()
	r, err := reader(tx, thread, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	row := func(k, v []byte) string {
		iv, err := inflateRow(v)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%q=%x", k, iv)
	}
	prefixes := [][]byte{nil}
	if thread != "" {
		prefixes = nil
	}
	for _, th := range threads {
		if thread != "" && th != thread {
			continue
		}
		prefixes = append(prefixes, lgKey(th, ""), lgKey(th, "", lgKindCheckpoint, ""), lgKey(th, "", lgKindBlob, "messages", ""),
			lgKey(th, "", lgKindWrite, ""), lgKey(th, "sub", ""))
	}
	for _, p := range prefixes {
		var all []string
		r.scan(p, func(k, v []byte) bool { all = append(all, row(k, v)); return true })
		out = append(out, fmt.Sprintf("scan %q: %v", p, all))
		for _, below := range [][]byte{nil, append(storageCopy(p), "cp-2"...), append(storageCopy(p), 0xff)} {
			var back []string
			r.scanBack(p, below, func(k, v []byte) bool { back = append(back, row(k, v)); return len(back) < 3 })
			out = append(out, fmt.Sprintf("back %q below %q: %v", p, below, back))
		}
		k, v := r.last(p)
		out = append(out, fmt.Sprintf("last %q: %q %v", p, k, v != nil))
	}
	for _, th := range threads {
		if thread != "" && th != thread {
			continue // a thread's reader reads only its rows
		}
		for _, k := range [][]byte{lgKey(th, "", lgKindCheckpoint, "cp-1"), lgKey(th, "", lgKindBlob, "messages", "v2"), lgKey(th, "", lgKindCheckpoint, "none")} {
			if v := r.get(k); v != nil {
				out = append(out, "get "+row(k, v))
			} else {
				out = append(out, fmt.Sprintf("get %q: none", k))
			}
		}
	}
	return out
}

// TestPackedThreadsReadAsUnpacked: with some threads packed, every read
// through the checkpoint reader (one thread's, and every thread's, which
// merges lg with the packed blocks) returns what it returned before they
// were packed; a write to a packed thread puts its rows back in lg first.
func TestPackedThreadsReadAsUnpacked(t *testing.T) {
	db, err := storage.Open(filepath.Join(t.TempDir(), "agent.db"), time.Second, Migrations)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	threads := []string{"1f0a-t1", "1f0a-t2", "1f0a-t20", "1f0b-t3"}
	err = db.Update(func(tx *bolt.Tx) error {
		lg := tx.Bucket([]byte(bLG))
		for i, th := range threads {
			for j := 1; j <= 3; j++ {
				ckpt := &lgCheckpoint{RunID: "run", Checkpoint: Typed{T: "msgpack", B: bytes.Repeat([]byte{byte(j)}, 40*j)},
					ChannelVersions: map[string]string{"messages": fmt.Sprintf("%032d.0.5", j)}}
				cv := encodeCheckpoint(ckpt)
				rows := []kvRow{
					{lgKey(th, "", lgKindCheckpoint, fmt.Sprintf("cp-%d", j)), cv},
					{lgKey(th, "", lgKindBlob, "messages", fmt.Sprintf("v%d", j)), []byte(fmt.Sprintf("blob %d %d", i, j))},
					{append(lgKey(th, "", lgKindWrite, fmt.Sprintf("cp-%d", j), "task", ""), idxBytes(int32(j-2))...), []byte("write")},
					{lgKey(th, "sub", lgKindCheckpoint, fmt.Sprintf("cp-%d", j)), cv},
				}
				for _, r := range rows {
					if err := lg.Put(r.k, r.v); err != nil {
						return err
					}
				}
			}
		}
		var before [][]string
		for _, th := range append([]string{""}, threads...) {
			before = append(before, lgReads(t, tx, th, threads))
		}
		packed := []string{"1f0a-t1", "1f0a-t20", "1f0b-t3"}
		for _, th := range packed {
			pk, err := loadPacking(tx, []byte(th))
			if err != nil {
				return err
			}
			if err := pk.store(tx, []byte(th)); err != nil {
				return err
			}
			if k, _ := lg.Cursor().Seek(lgKey(th, "")); k != nil && bytes.HasPrefix(k, lgKey(th, "")) {
				t.Fatalf("thread %s still has rows in lg after packing", th)
			}
		}
		blocks := 0
		_ = tx.Bucket([]byte(bLGPacked)).ForEach(func(_, _ []byte) error { blocks++; return nil })
		if n := blocks; n != len(packed) {
			t.Fatalf("%d packed blocks, want %d", n, len(packed))
		}
		for i, th := range append([]string{""}, threads...) {
			if got := lgReads(t, tx, th, threads); fmt.Sprint(got) != fmt.Sprint(before[i]) {
				for j := range got {
					if j < len(before[i]) && got[j] != before[i][j] {
						t.Errorf("reader %q, read %d:\n got  %s\n want %s", th, j, got[j], before[i][j])
						break
					}
				}
				t.Fatalf("reader %q reads differently once threads are packed", th)
			}
		}
		// A unit of work's scan reads the block; its write unpacks it.
		bt := &boltTx{tx: tx}
		var n int
		if err := bt.ScanCheckpointRows(lgKey("1f0a-t1", ""), func(_, _ []byte) bool { n++; return true }); err != nil || n != 12 {
			t.Fatalf("scan of a packed thread: %d rows, %v", n, err)
		}
		if err := bt.DeleteCheckpointRow(lgKey("1f0a-t1", "", lgKindCheckpoint, "cp-3")); err != nil {
			return err
		}
		if tx.Bucket([]byte(bLGPacked)).Get([]byte("1f0a-t1")) != nil {
			t.Fatal("a write left the thread packed")
		}
		n = 0
		if err := bt.ScanCheckpointRows(lgKey("1f0a-t1", ""), func(_, _ []byte) bool { n++; return true }); err != nil || n != 11 {
			t.Fatalf("after unpacking and deleting one row: %d rows, %v", n, err)
		}
		// A journaled row applied to a packed thread unpacks it too.
		if err := applyRows(tx, []wbRow{{bucket: bLG, mode: rowPut, key: lgKey("1f0b-t3", "", lgKindBlob, "x", "1"), val: []byte("x")}}); err != nil {
			return err
		}
		if tx.Bucket([]byte(bLGPacked)).Get([]byte("1f0b-t3")) != nil || lg.Get(lgKey("1f0b-t3", "", lgKindCheckpoint, "cp-1")) == nil {
			t.Fatal("an applied row left the thread packed")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestPackRoundTrip(t *testing.T) {
	thread := []byte("thread")
	ck := encodeCheckpoint(&lgCheckpoint{Checkpoint: Typed{T: "json", B: bytes.Repeat([]byte("abc"), 100)}})
	rows := []kvRow{{lgKey("thread", "", "b", "c", "1"), []byte("v1")}, {lgKey("thread", "", "c", "1"), ck}, {lgKey("thread", "", "w", "x"), nil}}
	block, err := encodePack(thread, rows)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodePack(thread, block)
	if err != nil || len(got) != len(rows) {
		t.Fatalf("%d rows, %v", len(got), err)
	}
	for i := range rows {
		if !bytes.Equal(got[i].k, rows[i].k) || !bytes.Equal(got[i].v, rows[i].v) && len(rows[i].v)+len(got[i].v) > 0 {
			t.Fatalf("row %d: %q=%x, want %q=%x", i, got[i].k, got[i].v, rows[i].k, rows[i].v)
		}
	}
	// A row stored deflated (format 2), which encodePack never packs.
	deflated := packEncoder.EncodeAll([]byte{1, 'x', 2, lgRowFormatFlate, 0}, []byte{lgPackFormat})
	for _, bad := range [][]byte{nil, {9}, block[:len(block)/2], append([]byte{lgPackFormat}, 0xff, 0xff), deflated} {
		if _, err := decodePack(thread, bad); err == nil {
			t.Fatalf("decodePack(%x) accepted a damaged block", bad)
		}
	}
}

func FuzzDecodePack(f *testing.F) {
	block, _ := encodePack([]byte("t"), []kvRow{{[]byte("t\x00a"), []byte("v")}})
	f.Add(block)
	f.Fuzz(func(t *testing.T, b []byte) {
		rows, err := decodePack([]byte("t"), b)
		if err != nil {
			return
		}
		again, err := encodePack([]byte("t"), rows)
		if err != nil {
			t.Fatalf("a decoded block does not encode: %v", err)
		}
		if _, err := decodePack([]byte("t"), again); err != nil {
			t.Fatalf("re-encoded block does not decode: %v", err)
		}
	})
}

// TestFlushPacksIdleThreads: the flush after a thread's run ended packs
// its journaled checkpoint rows (never putting them in lg), a thread whose
// run still writes stays in lg, a new run's write unpacks it, and a
// thread too big to rewrite after every run stays in lg.
func TestFlushPacksIdleThreads(t *testing.T) {
	r := &restartable{t: t, path: filepath.Join(t.TempDir(), "agent.db")}
	e := r.start()
	defer func() { r.crash() }()
	ctx := context.Background()
	s := e.bolt()
	flush := func() {
		t.Helper()
		if err := s.w.Update(func(*bolt.Tx) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	where := func(thread string) (packed bool, inLG int) {
		t.Helper()
		_ = e.DB.View(func(tx *bolt.Tx) error {
			packed = tx.Bucket([]byte(bLGPacked)).Get([]byte(thread)) != nil
			c := tx.Bucket([]byte(bLG)).Cursor()
			for k, _ := c.Seek(lgKey(thread, "")); k != nil && bytes.HasPrefix(k, lgKey(thread, "")); k, _ = c.Next() {
				inLG++
			}
			return nil
		})
		return packed, inLG
	}
	read := func(thread string, key []byte) string {
		t.Helper()
		var v []byte
		if err := s.ViewCheckpointRows(ctx, thread, func(lg checkpointRows) error { v = lg.get(key); return nil }); err != nil {
			t.Fatal(err)
		}
		return string(v)
	}
	write := func(thread, run string, rows ...cpRow) {
		t.Helper()
		if err := s.PutCheckpointRows(ctx, thread, run, rows); err != nil {
			t.Fatal(err)
		}
	}
	key := func(thread, ch, v string) []byte { return lgKey(thread, "", lgKindBlob, ch, v) }

	done, running, big := "1f0-done", "1f0-running", "1f0-big"
	for _, th := range []string{done, running, big} {
		s.OpenFence(th, "run-1")
		write(th, "run-1", cpRow{rowPut, key(th, "a", "1"), []byte("a1")}, cpRow{rowPutNew, key(th, "b", "1"), []byte("b1")})
	}
	write(big, "run-1", cpRow{rowPut, key(big, "huge", "1"), bytes.Repeat([]byte("x"), lgPackMax)})
	s.CloseFence(done)
	s.CloseFence(big)
	flush()
	if packed, n := where(done); !packed || n != 0 {
		t.Fatalf("ended thread: packed %v, %d rows in lg; want packed, none", packed, n)
	}
	if packed, n := where(running); packed || n != 2 {
		t.Fatalf("running thread: packed %v, %d rows in lg; want 2 in lg", packed, n)
	}
	if packed, n := where(big); packed || n != 3 {
		t.Fatalf("big thread: packed %v, %d rows in lg; want 3 in lg", packed, n)
	}
	if got := read(done, key(done, "b", "1")); got != "b1" {
		t.Fatalf("packed row read back %q", got)
	}

	// The running thread's run ends with one more row: packed with it.
	write(running, "run-1", cpRow{rowPut, key(running, "c", "1"), []byte("c1")})
	s.CloseFence(running)
	flush()
	if packed, n := where(running); !packed || n != 0 {
		t.Fatalf("thread whose run ended: packed %v, %d rows in lg", packed, n)
	}

	// A next run on the packed thread: journaled rows read over the block,
	// a put-new of an existing key kept as it was, then packed again.
	s.OpenFence(done, "run-2")
	write(done, "run-2", cpRow{rowPutNew, key(done, "b", "1"), []byte("b2")}, cpRow{rowPut, key(done, "a", "2"), []byte("a2")})
	if got := read(done, key(done, "b", "1")) + read(done, key(done, "a", "2")); got != "b1a2" {
		t.Fatalf("pending rows over the block: %q", got)
	}
	s.CloseFence(done)
	flush()
	if packed, n := where(done); !packed || n != 0 {
		t.Fatalf("after the next run: packed %v, %d rows in lg", packed, n)
	}

	// After a crash and a restart the packed rows read as before.
	r.crash()
	e = r.start()
	s = e.bolt()
	if got := read(done, key(done, "a", "1")) + read(done, key(done, "b", "1")) + read(done, key(done, "a", "2")) + read(running, key(running, "c", "1")); got != "a1b1a2c1" {
		t.Fatalf("after a restart: %q", got)
	}
}

// TestUnitOfWorkRepacks: a unit of work that changes a packed thread's rows
// (a prune, a rollback, update_state's write outside any run) leaves it
// packed, with the change; one whose thread has a running run leaves it
// in lg for the flush after the run.
func TestUnitOfWorkRepacks(t *testing.T) {
	r := &restartable{t: t, path: filepath.Join(t.TempDir(), "agent.db")}
	e := r.start()
	defer r.crash()
	ctx := context.Background()
	s := e.bolt()
	th, err := e.CreateThread("", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	id := th.ThreadID
	k1, k2 := lgKey(id, "", lgKindBlob, "a", "1"), lgKey(id, "", lgKindBlob, "b", "1")
	s.OpenFence(id, "run-1")
	if err := s.PutCheckpointRows(ctx, id, "run-1", []cpRow{{rowPut, k1, []byte("a")}, {rowPut, k2, []byte("b")}}); err != nil {
		t.Fatal(err)
	}
	s.CloseFence(id)
	state := func() (packed bool, rows int) {
		t.Helper()
		_ = e.DB.View(func(tx *bolt.Tx) error {
			packed = tx.Bucket([]byte(bLGPacked)).Get([]byte(id)) != nil
			return nil
		})
		if err := s.ViewCheckpointRows(ctx, id, func(lg checkpointRows) error {
			lg.scan(lgKey(id, ""), func(_, _ []byte) bool { rows++; return true })
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return packed, rows
	}
	if err := s.w.Update(func(*bolt.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if packed, n := state(); !packed || n != 2 {
		t.Fatalf("after the run: packed %v, %d rows", packed, n)
	}
	if err := s.Update(ctx, func(tx Tx) error { return tx.DeleteCheckpointRow(k2) }); err != nil {
		t.Fatal(err)
	}
	if packed, n := state(); !packed || n != 1 {
		t.Fatalf("after a unit of work deleted a row: packed %v, %d rows; want packed, 1", packed, n)
	}
	if err := s.PutCheckpointRows(ctx, id, "", []cpRow{{rowPut, k2, []byte("b2")}}); err != nil {
		t.Fatal(err)
	}
	if packed, n := state(); !packed || n != 2 {
		t.Fatalf("after a write outside any run: packed %v, %d rows; want packed, 2", packed, n)
	}
	s.OpenFence(id, "run-2")
	if err := s.Update(ctx, func(tx Tx) error { return tx.DeleteCheckpointRow(k2) }); err != nil {
		t.Fatal(err)
	}
	if packed, n := state(); packed || n != 1 {
		t.Fatalf("with a run writing: packed %v, %d rows; want in lg, 1", packed, n)
	}
}
