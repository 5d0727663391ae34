package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

// indexDump is every index bucket's rows.
func indexDump(t *testing.T, tx *bolt.Tx) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, name := range threadIndexBuckets {
		b := tx.Bucket([]byte(name))
		if b == nil {
			t.Fatalf("no bucket %s", name)
		}
		_ = b.ForEach(func(k, v []byte) error {
			out[name] = append(out[name], fmt.Sprintf("%x=%x", k, v))
			return nil
		})
	}
	return out
}

// rebuiltDump is what the migration would build from db's records now.
func rebuiltDump(t *testing.T, db *bolt.DB) map[string][]string {
	t.Helper()
	var out map[string][]string
	tx, err := db.Begin(true)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	for _, name := range threadIndexBuckets {
		if err := tx.DeleteBucket([]byte(name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := buildThreadIndexes(tx); err != nil {
		t.Fatal(err)
	}
	out = indexDump(t, tx)
	return out
}

func sameDump(t *testing.T, what string, got, want map[string][]string) {
	t.Helper()
	for _, name := range threadIndexBuckets {
		if !slices.Equal(got[name], want[name]) {
			t.Errorf("%s: bucket %s has %d rows, want %d", what, name, len(got[name]), len(want[name]))
		}
	}
}

// TestThreadIndexMigrationMatchesLiveWrites: migration 7 over a database
// written before the indexes existed builds exactly the rows live writes
// keep; and after updates and deletions (status, metadata, busy changes)
// the live rows still equal a rebuild.
func TestThreadIndexMigrationMatchesLiveWrites(t *testing.T) {
	recs := genThreads(500, 4)
	// A version-6 database, its threads written as version 6 wrote them.
	old, err := storage.Open(filepath.Join(t.TempDir(), "agent.db"), time.Second, Migrations[:6])
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := old.Update(func(tx *bolt.Tx) error {
		for _, r := range recs {
			if err := putJSON(tx.Bucket([]byte(bThreads)), r.ThreadID, r); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := storage.Migrate(old, Migrations, nil); err != nil {
		t.Fatal(err)
	}
	var migrated map[string][]string
	_ = old.View(func(tx *bolt.Tx) error { migrated = indexDump(t, tx); return nil })

	s, db := openIndexStore(t)
	putThreads(t, s, recs)
	var live map[string][]string
	_ = db.View(func(tx *bolt.Tx) error { live = indexDump(t, tx); return nil })
	sameDump(t, "migrated vs live", migrated, live)
	if len(live[bThreadsCreated]) != len(recs) || len(live[bThreadsBusy]) == 0 || len(live[bThreadsMeta]) < len(recs) {
		t.Fatalf("live indexes: %d created, %d busy, %d metadata rows", len(live[bThreadsCreated]), len(live[bThreadsBusy]), len(live[bThreadsMeta]))
	}

	// Changes: every index field of some threads, and deletions.
	mustUpdate(t, s, func(tx Tx) error {
		for i, r := range recs[:100] {
			r.Status, r.UpdatedAt = ThreadError, r.UpdatedAt.Add(time.Hour)
			r.Metadata = map[string]any{"user": "changed", "k": float64(i)}
			r.Active, r.Queue = "", nil
			if i%3 == 0 {
				r.Active = storage.NewID().String()
			}
			if err := tx.PutThread(r); err != nil {
				return err
			}
		}
		for _, r := range recs[100:150] {
			if err := tx.DeleteThreadRecord(r.ThreadID); err != nil {
				return err
			}
		}
		return nil
	})
	_ = db.View(func(tx *bolt.Tx) error { live = indexDump(t, tx); return nil })
	sameDump(t, "after updates vs rebuild", live, rebuiltDump(t, db))
}

// TestThreadIndexJournaled: a journaled unit (UpdateThread) journals the
// thread's index rows with its record; searches see them (committed
// first); a crash replays them; and replay derives them for a record
// journaled without them (a journal from before the indexes).
func TestThreadIndexJournaled(t *testing.T) {
	r := &restartable{t: t, path: filepath.Join(t.TempDir(), "agent.db")}
	e := r.start()
	th, err := e.CreateThread("", map[string]any{"user": "journaled"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := e.FindThreads(ThreadFilter{Metadata: map[string]any{"user": "journaled"}}); err != nil || len(got) != 1 {
		t.Fatalf("search after a journaled creation: %v, %v", got, err)
	}
	if n, err := e.CountThreads(ThreadFilter{Status: ThreadIdle}); err != nil || n != 1 {
		t.Fatalf("idle count (a counter) after a journaled creation: %d, %v", n, err)
	}
	th2, err := e.CreateThread("", map[string]any{"user": "journaled"}, "")
	if err != nil {
		t.Fatal(err)
	}
	r.crash()
	e = r.start()
	if n, err := e.CountThreads(ThreadFilter{Metadata: map[string]any{"user": "journaled"}}); err != nil || n != 2 {
		t.Fatalf("count after replay: %d, %v", n, err)
	}
	// The second creation's counter delta was only in the journal.
	if n, err := e.CountThreads(ThreadFilter{}); err != nil || n != 2 {
		t.Fatalf("total count (a counter) after replay: %d, %v", n, err)
	}
	sameDump(t, "after replay", func() (d map[string][]string) {
		_ = e.DB.View(func(tx *bolt.Tx) error { d = indexDump(t, tx); return nil })
		return d
	}(), rebuiltDump(t, e.DB))
	r.crash()

	// A record journaled without its index rows (as before the indexes).
	db, err := storage.Open(r.path, time.Second, Migrations)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rec := genThreads(2, 5)[0]
	rec.ThreadID = th.ThreadID
	rec.Status = ThreadInterrupted
	raw := mustJSON(t, rec)
	if err := db.Update(func(tx *bolt.Tx) error {
		return replayThreadRows(tx, []wbRow{{bucket: bThreads, mode: rowPut, key: []byte(th.ThreadID), val: raw},
			{bucket: bThreads, mode: rowDelete, key: []byte(th2.ThreadID)}})
	}); err != nil {
		t.Fatal(err)
	}
	var got map[string][]string
	_ = db.View(func(tx *bolt.Tx) error { got = indexDump(t, tx); return nil })
	sameDump(t, "replayed without index rows", got, rebuiltDump(t, db))
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestThreadIndexMigrationSkipsUndecodable: a thread record that does not
// decode does not stop migration 7 (the agent would not start); it is
// left out of the indexes and can still be deleted.
func TestThreadIndexMigrationSkipsUndecodable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.db")
	old, err := storage.Open(path, time.Second, Migrations[:6])
	if err != nil {
		t.Fatal(err)
	}
	good := genThreads(3, 8)
	bad := uuid.NewString()
	if err := old.Update(func(tx *bolt.Tx) error {
		for _, r := range good {
			if err := putJSON(tx.Bucket([]byte(bThreads)), r.ThreadID, r); err != nil {
				return err
			}
		}
		return tx.Bucket([]byte(bThreads)).Put([]byte(bad), []byte(`{"thread_id": 7}`))
	}); err != nil {
		t.Fatal(err)
	}
	if err := storage.Migrate(old, Migrations, nil); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	s, err := openBoltStore(old, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.pend.j.Close(); _ = old.Close() }()
	mustView(t, s, func(tx ReadTx) error {
		if n, err := tx.CountThreads(ThreadFilter{}); err != nil || n != len(good) {
			return fmt.Errorf("count: %d %v, want %d", n, err, len(good))
		}
		return nil
	})
	mustUpdate(t, s, func(tx Tx) error { return tx.DeleteThreadRecord(bad) })
	if err := old.View(func(tx *bolt.Tx) error {
		if tx.Bucket([]byte(bThreads)).Get([]byte(bad)) != nil {
			return errors.New("the undecodable thread is still there")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
