package audit

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

func verifyNow(l *Log, db *bolt.DB) VerifyReport {
	var rep VerifyReport
	_ = db.View(func(tx *bolt.Tx) error { rep = l.Verify(tx); return nil })
	return rep
}

func rawHead(tx *bolt.Tx, org uuid.UUID) []byte {
	return storage.Copy(tx.Bucket([]byte(bucketEvents)).Get(storage.Key(org, storage.U64(headSeq))))
}

// deleteChain removes every key of an organization's chain (records and
// head), and its operation index entries when idx is set.
func deleteChain(tx *bolt.Tx, org uuid.UUID, idx bool) error {
	buckets := []string{bucketEvents}
	if idx {
		buckets = append(buckets, idxOp)
	}
	for _, name := range buckets {
		b := tx.Bucket([]byte(name))
		var doomed [][]byte
		c := b.Cursor()
		for k, _ := c.Seek(org[:]); k != nil && strings.HasPrefix(string(k), string(org[:])); k, _ = c.Next() {
			doomed = append(doomed, storage.Copy(k))
		}
		for _, k := range doomed {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
	}
	return nil
}

// TestVerifyDetectsTruncationAndDeletion removes records from the end of a
// chain, rolls heads and the manifest back to older authentic copies, and
// deletes chains whole: each is reported, naming the organization when
// anything is left to name it by.
func TestVerifyDetectsTruncationAndDeletion(t *testing.T) {
	org, other := uuid.New(), uuid.New()
	type snapshot struct{ head, manifest []byte }
	cases := []struct {
		name string
		// mutate gets the head and manifest as they were after 3 events.
		mutate func(tx *bolt.Tx, old snapshot) error
		// want are substrings of the reasons, keyed by organization
		// ("" for the manifest, which covers every chain).
		want map[string]string
	}{
		{"untouched", func(*bolt.Tx, snapshot) error { return nil }, nil},
		{"last 3 removed, head rewritten", func(tx *bolt.Tx, _ snapshot) error {
			b := tx.Bucket([]byte(bucketEvents))
			rec, err := decodeRecord(b.Get(storage.Key(org, storage.U64(3))))
			if err != nil {
				return err
			}
			for seq := uint64(4); seq <= 6; seq++ {
				if err := b.Delete(storage.Key(org, storage.U64(seq))); err != nil {
					return err
				}
			}
			return storage.Put(tx, bucketEvents, storage.Key(org, storage.U64(headSeq)),
				&head{Seq: 3, MAC: rec.MAC, Time: rec.Time})
		}, map[string]string{org.String(): "not authentic", "": "truncated"}},
		{"last 3 removed, head rolled back", func(tx *bolt.Tx, old snapshot) error {
			b := tx.Bucket([]byte(bucketEvents))
			for seq := uint64(4); seq <= 6; seq++ {
				if err := b.Delete(storage.Key(org, storage.U64(seq))); err != nil {
					return err
				}
			}
			return b.Put(storage.Key(org, storage.U64(headSeq)), old.head)
			// The operation index still lists the records cut off, which
			// names the organization whose chain was truncated.
		}, map[string]string{org.String(): "names record 4, which the chain does not hold", "": "rolled back"}},
		{"head rolled back, records kept", func(tx *bolt.Tx, old snapshot) error {
			return tx.Bucket([]byte(bucketEvents)).Put(storage.Key(org, storage.U64(headSeq)), old.head)
		}, map[string]string{org.String(): "past the chain head", "": "rolled back"}},
		{"chain deleted whole", func(tx *bolt.Tx, _ snapshot) error {
			return deleteChain(tx, org, true)
		}, map[string]string{"": "deleted whole"}},
		{"chain deleted, index left", func(tx *bolt.Tx, _ snapshot) error {
			return deleteChain(tx, org, false)
		}, map[string]string{org.String(): "deleted whole", "": "deleted whole"}},
		{"manifest deleted", func(tx *bolt.Tx, _ snapshot) error {
			return tx.Bucket([]byte(bucketSeals)).Delete(storage.AuditManifestKey)
		}, map[string]string{"": "missing"}},
		{"manifest rolled back", func(tx *bolt.Tx, old snapshot) error {
			return tx.Bucket([]byte(bucketSeals)).Put(storage.AuditManifestKey, old.manifest)
		}, map[string]string{"": "rolled back"}},
		{"manifest garbled", func(tx *bolt.Tx, _ snapshot) error {
			return tx.Bucket([]byte(bucketSeals)).Put(storage.AuditManifestKey, []byte("{}"))
		}, map[string]string{"": "unreadable"}},
		{"manifest forged", func(tx *bolt.Tx, _ snapshot) error {
			m, _, err := getManifest(tx)
			if err != nil {
				return err
			}
			m.Chains--
			return putManifest(tx, &m)
		}, map[string]string{"": "not authentic"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, db, w := testLog(t)
			appendN(t, l, w, org, "create_deployment", 3)
			var old snapshot
			_ = db.View(func(tx *bolt.Tx) error {
				old.head = rawHead(tx, org)
				old.manifest = storage.Copy(tx.Bucket([]byte(bucketSeals)).Get(storage.AuditManifestKey))
				return nil
			})
			appendN(t, l, w, org, "create_deployment", 3)
			appendN(t, l, w, other, "create_workspace", 2) // stays intact
			if err := db.Update(func(tx *bolt.Tx) error { return tc.mutate(tx, old) }); err != nil {
				t.Fatal(err)
			}
			rep := verifyNow(l, db)
			got := map[string]string{}
			for _, b := range rep.Breaks {
				got[b.Org] = b.Reason
			}
			if len(got) != len(tc.want) || len(rep.Breaks) != len(tc.want) {
				t.Fatalf("breaks %+v, want %v", rep.Breaks, tc.want)
			}
			for o, reason := range tc.want {
				if !strings.Contains(got[o], reason) {
					t.Fatalf("break of %q: %q, want %q (all: %+v)", o, got[o], reason, rep.Breaks)
				}
			}
			if tc.want == nil && (rep.Events != 8 || rep.SealedSince == nil) {
				t.Fatalf("untouched: %+v", rep)
			}
			// Writes go on, and do not hide the damage.
			appendN(t, l, w, other, "create_workspace", 1)
			if rep := verifyNow(l, db); (len(rep.Breaks) == 0) != (tc.want == nil) {
				t.Fatalf("after another event: %+v", rep)
			}
		})
	}
}

// TestSealsSurvivePruning prunes a chain entirely and in part: the heads and
// the manifest still agree, and a later truncation is still caught.
func TestSealsSurvivePruning(t *testing.T) {
	l, db, w := testLog(t)
	org := uuid.New()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l.Now = func() time.Time { return now }
	appendN(t, l, w, org, "create_deployment", 4)
	now = now.Add(48 * time.Hour)
	if err := w.Update(func(tx *bolt.Tx) error { _, err := l.Prune(tx, org, now); return err }); err != nil {
		t.Fatal(err)
	}
	if rep := verifyNow(l, db); len(rep.Breaks) != 0 || rep.Events != 0 || rep.Organizations != 1 {
		t.Fatalf("fully pruned: %+v", rep)
	}
	appendN(t, l, w, org, "update_deployment", 3)
	if rep := verifyNow(l, db); len(rep.Breaks) != 0 || rep.Events != 3 {
		t.Fatalf("appended after pruning: %+v", rep)
	}
	// Deleting the chain and its anchor leaves the manifest to tell.
	_ = db.Update(func(tx *bolt.Tx) error {
		return errorsJoin(deleteChain(tx, org, true), tx.Bucket([]byte(bucketAnchors)).Delete(org[:]))
	})
	if rep := verifyNow(l, db); len(rep.Breaks) != 1 || !strings.Contains(rep.Breaks[0].Reason, "deleted whole") {
		t.Fatalf("chain and anchor deleted: %+v", rep)
	}
}

// appendV5 writes an event the way schema version 5 did: a head without a
// seal, and no manifest.
func appendV5(tx *bolt.Tx, l *Log, org uuid.UUID, i int) error {
	h, _, err := getHead(tx, org)
	if err != nil {
		return err
	}
	e := entry(org, "create_deployment", i)
	b, err := json.Marshal(body{ID: storage.NewID().String(), Version: "v5", Op: e.Op, OK: true, Actor: e.Actor, Request: e.Request})
	if err != nil {
		return err
	}
	seq := h.Seq + 1
	rec := record{Body: b, Time: time.Now().UnixMilli(), Prev: h.MAC}
	rec.MAC = l.mac(org, seq, rec.Time, rec.Prev, b)
	raw, err := encodeRecord(&rec)
	if err != nil {
		return err
	}
	return errorsJoin(
		tx.Bucket([]byte(bucketEvents)).Put(storage.Key(org, storage.U64(seq)), raw),
		storage.Put(tx, bucketEvents, storage.Key(org, storage.U64(headSeq)),
			map[string]any{"seq": seq, "mac": rec.MAC, "time": rec.Time}),
		tx.Bucket([]byte(idxOp)).Put(storage.Key(org, e.Op, []byte{0}, storage.U64(seq)), nil),
	)
}

// TestMigrationSealsExistingChains builds a version-5 database holding two
// organizations' chains, written the old way, and upgrades it: without the
// master key the upgrade refuses; with it the chains verify, go on, and are
// protected from then on.
func TestMigrationSealsExistingChains(t *testing.T) {
	path := filepath.Join(t.TempDir(), "slipway.db")
	master := []byte("0123456789abcdef0123456789abcdef")
	keys := func(purpose string) []byte { return storage.Derive(master, purpose) }
	l := &Log{Key: keys(storage.AuditChainPurpose), Version: "test"}
	v5 := storage.ControlPlaneMigrations[:5]
	db, err := storage.Open(path, time.Second, v5)
	if err != nil {
		t.Fatal(err)
	}
	orgA, orgB := uuid.New(), uuid.New()
	for i := 0; i < 5; i++ {
		if err := db.Update(func(tx *bolt.Tx) error {
			return errorsJoin(appendV5(tx, l, orgA, i), appendV5(tx, l, orgB, i))
		}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	if _, err := storage.Open(path, time.Second, storage.ControlPlaneMigrations); err == nil ||
		!strings.Contains(err.Error(), "master key") {
		t.Fatalf("upgrade without the key: %v", err)
	}
	db, err = storage.OpenKeyed(path, time.Second, storage.ControlPlaneMigrations, keys)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if rep := verifyNow(l, db); len(rep.Breaks) != 0 || rep.Events != 10 || rep.Organizations != 2 || rep.SealedSince == nil {
		t.Fatalf("after the upgrade: %+v", rep)
	}
	w := &storage.Committer{DB: db}
	appendN(t, l, w, orgA, "update_deployment", 2)
	appendN(t, l, w, uuid.New(), "create_workspace", 1)
	if rep := verifyNow(l, db); len(rep.Breaks) != 0 || rep.Events != 13 || rep.Organizations != 3 {
		t.Fatalf("appended after the upgrade: %+v", rep)
	}
	_ = db.Update(func(tx *bolt.Tx) error { return deleteChain(tx, orgB, true) })
	if rep := verifyNow(l, db); len(rep.Breaks) != 1 || !strings.Contains(rep.Breaks[0].Reason, "deleted whole") {
		t.Fatalf("chain deleted after the upgrade: %+v", rep)
	}
}
