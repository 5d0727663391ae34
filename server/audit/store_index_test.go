package audit

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

// TestVerifyDetectsIndexTampering edits the operation index, which the
// chain's MACs do not cover: entries deleted (hiding events from filtered
// queries), moved to another operation, added for a record that does not
// exist, or malformed. Verify names each, while the chain itself verifies;
// queries filtered by operation never show a record under an operation it
// is not, nor twice. Reindex repairs each.
func TestVerifyDetectsIndexTampering(t *testing.T) {
	org, other := uuid.New(), uuid.New()
	idx := func(tx *bolt.Tx) *bolt.Bucket { return tx.Bucket([]byte(idxOp)) }
	cases := []struct {
		name    string
		mutate  func(tx *bolt.Tx) error
		wantSeq uint64
		reason  string
	}{
		{"untouched", func(*bolt.Tx) error { return nil }, 0, ""},
		{"create_deployment entries deleted", func(tx *bolt.Tx) error {
			for seq := uint64(1); seq <= 3; seq++ {
				if err := idx(tx).Delete(indexKey(org, "create_deployment", seq)); err != nil {
					return err
				}
			}
			return nil
		}, 1, "record 1 (create_deployment) is missing from the index"},
		{"one entry deleted", func(tx *bolt.Tx) error {
			return idx(tx).Delete(indexKey(org, "delete_deployment", 5))
		}, 5, "record 5 (delete_deployment) is missing"},
		{"entry moved to another operation", func(tx *bolt.Tx) error {
			return errorsJoin(idx(tx).Delete(indexKey(org, "create_deployment", 2)),
				idx(tx).Put(indexKey(org, "delete_deployment", 2), nil))
		}, 2, "record 2 (create_deployment) is missing"},
		{"entry added under another operation", func(tx *bolt.Tx) error {
			return idx(tx).Put(indexKey(org, "delete_deployment", 2), nil)
		}, 2, "an entry under delete_deployment names record 2, which is create_deployment"},
		{"entry for a record that does not exist", func(tx *bolt.Tx) error {
			return idx(tx).Put(indexKey(org, "create_deployment", 99), nil)
		}, 99, "names record 99, which the chain does not hold"},
		{"malformed entry", func(tx *bolt.Tx) error {
			return idx(tx).Put(storage.Key(org, "junk"), nil)
		}, 0, "malformed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, db, w := testLog(t)
			appendN(t, l, w, org, "create_deployment", 3)
			appendN(t, l, w, org, "delete_deployment", 3)
			appendN(t, l, w, other, "create_deployment", 2) // stays intact
			if err := db.Update(tc.mutate); err != nil {
				t.Fatal(err)
			}
			rep := verifyNow(l, db)
			if tc.reason == "" {
				if len(rep.Breaks) != 0 || rep.Events != 8 {
					t.Fatalf("untouched: %+v", rep)
				}
			} else if len(rep.Breaks) != 1 || rep.Breaks[0].Org != org.String() || rep.Breaks[0].Seq != tc.wantSeq ||
				!strings.Contains(rep.Breaks[0].Reason, "operation index: ") || !strings.Contains(rep.Breaks[0].Reason, tc.reason) {
				t.Fatalf("breaks %+v, want one of %s at seq %d: %q", rep.Breaks, org, tc.wantSeq, tc.reason)
			}
			// Whatever the index says, a filtered query shows only records
			// of the operations asked for, each once, and never fails.
			for _, ops := range [][]string{{"create_deployment"}, {"delete_deployment"}, {"create_deployment", "delete_deployment"}} {
				var page Page
				err := db.View(func(tx *bolt.Tx) error {
					var err error
					page, err = l.Run(tx, Query{Org: org, Start: 0, End: 1 << 62, Limit: 100, Ops: ops})
					return err
				})
				if err != nil {
					t.Fatalf("query %v: %v", ops, err)
				}
				seen := map[string]bool{}
				for _, it := range page.Items {
					uid, op := uidOf(t, it), opOf(t, it)
					if seen[uid] || !contains(ops, op) {
						t.Fatalf("query %v returned %s (%s) twice or under another operation", ops, uid, op)
					}
					seen[uid] = true
				}
			}
			var n int
			if err := w.Update(func(tx *bolt.Tx) error { var err error; n, err = l.Reindex(tx, org); return err }); err != nil || n != 6 {
				t.Fatalf("reindex: %d, %v", n, err)
			}
			if rep := verifyNow(l, db); len(rep.Breaks) != 0 || rep.Events != 8 {
				t.Fatalf("after reindex: %+v", rep)
			}
		})
	}
}

func opOf(t testing.TB, raw []byte) string {
	t.Helper()
	var ev struct {
		API struct {
			Operation string `json:"operation"`
		} `json:"api"`
	}
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	return ev.API.Operation
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
