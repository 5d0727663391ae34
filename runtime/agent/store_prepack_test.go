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

// openFlushStore is a bbolt store on a fresh database whose journal is
// flushed only when the test says so.
func openFlushStore(t testing.TB) *boltStore {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "agent.db"), time.Second, Migrations)
	if err != nil {
		t.Fatal(err)
	}
	s, err := openBoltStore(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.pend.j.Close()
		_ = db.Close()
	})
	return s
}

// journalRun journals run's checkpoint rows of thread as a running run
// does: n checkpoints, each with a channel value of size bytes and a write.
func journalRun(t *testing.T, s *boltStore, thread, run string, from, n, size int, end bool) {
	t.Helper()
	s.OpenFence(thread, run)
	for j := from; j < from+n; j++ {
		cv := encodeCheckpoint(&lgCheckpoint{RunID: run, Checkpoint: Typed{T: "msgpack", B: bytes.Repeat([]byte{byte(j)}, 40)},
			ChannelVersions: map[string]string{"messages": fmt.Sprintf("%032d.0.5", j)}})
		id := fmt.Sprintf("cp-%03d", j)
		rows := []cpRow{
			{rowPutChanged, lgKey(thread, "", lgKindBlob, "messages", fmt.Sprintf("v%03d", j)),
				encodeBlob(&lgBlob{RunID: run, Typed: Typed{T: "msgpack", B: bytes.Repeat([]byte(fmt.Sprint(j)), size)}})},
			{rowPut, lgKey(thread, "", lgKindCheckpoint, id), cv},
			{rowPutNew, append(lgKey(thread, "", lgKindWrite, id, "task", ""), idxBytes(0)...), encodeWrite(&lgWrite{RunID: run, TaskID: "task", Channel: "messages"})},
		}
		if err := s.PutCheckpointRows(context.Background(), thread, run, rows); err != nil {
			t.Fatal(err)
		}
	}
	if end {
		s.CloseFence(thread)
	}
}

// flush commits what the journal holds, as the flusher does (ahead:
// packing ended threads first, outside the writer lock).
func flush(t *testing.T, s *boltStore, ahead bool) {
	t.Helper()
	if ahead {
		if err := s.prepack(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.w.Update(func(*bolt.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// dumpBuckets is every row of the database but the journal's horizon.
func dumpBuckets(t *testing.T, s *boltStore) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := s.db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return b.ForEach(func(k, v []byte) error {
				out[fmt.Sprintf("%s/%q", name, k)] = fmt.Sprintf("%x", v)
				return nil
			})
		})
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func sameBuckets(t *testing.T, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("row %s: %.60s…, want %.60s…", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("row %s: not there without packing ahead", k)
		}
	}
}

// TestPackingAhead: a flush whose ended threads the flusher packed before
// taking the writer lock commits exactly what a flush packing them itself
// commits, for every kind of thread a flush meets (new, packed by an
// earlier flush, with rows in lg from a flush during its run, too big to
// pack, still running); and a pack is used only if nothing it was made
// from changed before the commit (another commit, a newer record of the
// thread), else the commit packs that thread itself.
func TestPackingAhead(t *testing.T) {
	// Every store gets the same history: three threads that ran and ended
	// (t-packed is packed by that flush), t-lg's run under way at the
	// flush; then t-lg's run ends, t-packed runs again, t-new and t-big
	// run and end, t-running is still running.
	history := func(s *boltStore) {
		journalRun(t, s, "t-packed", "r1", 0, 3, 20, true)
		journalRun(t, s, "t-lg", "r1", 0, 2, 20, false)
		flush(t, s, false)
		journalRun(t, s, "t-lg", "r1", 2, 1, 20, true)
		journalRun(t, s, "t-packed", "r2", 3, 3, 20, true)
		journalRun(t, s, "t-new", "r1", 0, 3, 20, true)
		journalRun(t, s, "t-big", "r1", 0, 3, lgPackMax/3, true)
		journalRun(t, s, "t-running", "r1", 0, 2, 20, false)
	}
	marker := []byte("made ahead")
	cases := []struct {
		name string
		// between runs after the flusher packed and before its commit.
		between func(s *boltStore)
		// used are the threads whose packs made ahead the commit uses.
		used []string
	}{
		{"nothing in between", nil, []string{"t-packed", "t-lg", "t-new"}},
		{"another commit in between", func(s *boltStore) {
			if err := s.db.Update(func(tx *bolt.Tx) error {
				return tx.Bucket([]byte("meta")).Put([]byte("other"), []byte("commit"))
			}); err != nil {
				t.Fatal(err)
			}
		}, nil},
		{"a newer record of one thread", func(s *boltStore) {
			journalRun(t, s, "t-new", "r2", 3, 1, 20, true)
		}, []string{"t-packed", "t-lg"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plain, ahead, marked := openFlushStore(t), openFlushStore(t), openFlushStore(t)
			for _, s := range []*boltStore{plain, ahead, marked} {
				history(s)
			}
			if err := ahead.prepack(); err != nil {
				t.Fatal(err)
			}
			// The same packs, but each block replaced by a marker: the
			// commit shows which ones it used.
			if err := marked.prepack(); err != nil {
				t.Fatal(err)
			}
			for _, pk := range marked.pend.pre.packs {
				if pk.block != nil {
					pk.block = marker
				}
			}
			for _, s := range []*boltStore{plain, ahead, marked} {
				if tc.between != nil {
					tc.between(s)
				}
				flush(t, s, false)
			}
			sameBuckets(t, dumpBuckets(t, ahead), dumpBuckets(t, plain))
			var used []string
			for _, th := range []string{"t-packed", "t-lg", "t-new", "t-big", "t-running"} {
				if err := marked.db.View(func(tx *bolt.Tx) error {
					if bytes.Equal(tx.Bucket([]byte(bLGPacked)).Get([]byte(th)), marker) {
						used = append(used, th)
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			if fmt.Sprint(used) != fmt.Sprint(tc.used) {
				t.Fatalf("the commit used the packs made ahead of %v, want %v", used, tc.used)
			}
			if ahead.pend.pre != nil || marked.pend.pre != nil {
				t.Fatal("packs made ahead outlive the commit that could use them")
			}
		})
	}
}
