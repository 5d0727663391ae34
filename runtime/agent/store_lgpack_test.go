package agent

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

// lgReads records what every read of checkpoint rows returns through
// reader(tx, thread): scans, backward scans (whole and stopped early),
// the last row and single gets, over prefixes at every level of the key.
func lgReads(t *testing.T, tx *bolt.Tx, thread string, threads []string) []string {
	t.Helper()
	r, err := (*pendingWrites)(nil).reader(tx, thread)
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
				cv, err := encodeCheckpoint(ckpt)
				if err != nil {
					return err
				}
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
			if err := packThread(tx, []byte(th)); err != nil {
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
	ck, _ := encodeCheckpoint(&lgCheckpoint{Checkpoint: Typed{T: "json", B: bytes.Repeat([]byte("abc"), 100)}})
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
	for _, bad := range [][]byte{nil, {9}, block[:len(block)/2], append([]byte{lgPackFormat}, 0xff, 0xff)} {
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
