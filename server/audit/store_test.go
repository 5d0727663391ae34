package audit

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

func testLog(t testing.TB) (*Log, *bolt.DB, *storage.Committer) {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "db"), time.Second, storage.ControlPlaneMigrations)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &Log{Key: []byte("0123456789abcdef0123456789abcdef"), Version: "test"}, db, &storage.Committer{DB: db}
}

func entry(org uuid.UUID, op string, i int) Entry {
	return Entry{Op: op, OK: true, Actor: Actor{OrgID: org.String(), UserID: uuid.NewString(), WorkspaceID: "ws-1"},
		Request:   Request{Method: "POST", Path: "/x", ClientIP: "127.0.0.1", Status: 200},
		Resources: []Resource{{UID: fmt.Sprint(i), Type: "thing"}}}
}

func appendN(t testing.TB, l *Log, w *storage.Committer, org uuid.UUID, op string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if err := w.Update(func(tx *bolt.Tx) error { return l.Append(tx, entry(org, op, i)) }); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAppendRejectsUnknownOperation(t *testing.T) {
	l, _, w := testLog(t)
	err := w.Update(func(tx *bolt.Tx) error { return l.Append(tx, entry(uuid.New(), "make_coffee", 0)) })
	if err == nil {
		t.Fatal("unknown operation accepted")
	}
}

func TestVerifyDetectsTampering(t *testing.T) {
	org := uuid.New()
	tamper := []struct {
		name    string
		mutate  func(tx *bolt.Tx) error
		wantSeq uint64
	}{
		{"untouched", func(*bolt.Tx) error { return nil }, 0},
		{"modified", func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte(bucketEvents))
			k := storage.Key(org, storage.U64(4))
			rec, _ := decodeRecord(b.Get(k))
			rec.Body = json.RawMessage(`{"id":"x","op":"delete_api_key","ok":true}`)
			raw, _ := encodeRecord(&rec)
			return b.Put(k, raw)
		}, 4},
		{"deleted", func(tx *bolt.Tx) error {
			return tx.Bucket([]byte(bucketEvents)).Delete(storage.Key(org, storage.U64(3)))
		}, 3},
		{"swapped", func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte(bucketEvents))
			k2, k5 := storage.Key(org, storage.U64(2)), storage.Key(org, storage.U64(5))
			v2, v5 := storage.Copy(b.Get(k2)), storage.Copy(b.Get(k5))
			return errorsJoin(b.Put(k2, v5), b.Put(k5, v2))
		}, 2},
		{"last removed", func(tx *bolt.Tx) error {
			return tx.Bucket([]byte(bucketEvents)).Delete(storage.Key(org, storage.U64(6)))
		}, 6},
	}
	for _, tc := range tamper {
		t.Run(tc.name, func(t *testing.T) {
			l, db, w := testLog(t)
			appendN(t, l, w, org, "create_deployment", 6)
			appendN(t, l, w, uuid.New(), "create_workspace", 3) // another org's chain stays intact
			if err := db.Update(tc.mutate); err != nil {
				t.Fatal(err)
			}
			var rep VerifyReport
			_ = db.View(func(tx *bolt.Tx) error { rep = l.Verify(tx); return nil })
			if tc.wantSeq == 0 {
				if len(rep.Breaks) != 0 || rep.Events != 9 {
					t.Fatalf("untouched log: %+v", rep)
				}
				return
			}
			if len(rep.Breaks) != 1 || rep.Breaks[0].Org != org.String() || rep.Breaks[0].Seq != tc.wantSeq {
				t.Fatalf("report %+v, want one break at seq %d", rep, tc.wantSeq)
			}
		})
	}
}

func errorsJoin(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func TestPruneKeepsChainVerifiable(t *testing.T) {
	l, db, w := testLog(t)
	org := uuid.New()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l.Now = func() time.Time { return now }
	appendN(t, l, w, org, "create_deployment", 5)
	now = now.Add(48 * time.Hour)
	appendN(t, l, w, org, "update_deployment", 3)
	var n int
	if err := w.Update(func(tx *bolt.Tx) (err error) {
		n, err = l.Prune(tx, org, now.Add(-24*time.Hour))
		return err
	}); err != nil || n != 5 {
		t.Fatalf("pruned %d, %v", n, err)
	}
	_ = db.View(func(tx *bolt.Tx) error {
		rep := l.Verify(tx)
		if len(rep.Breaks) != 0 || rep.Events != 3 {
			t.Fatalf("after prune: %+v", rep)
		}
		page, err := l.Run(tx, Query{Org: org, Start: 0, End: now.UnixMilli(), Limit: 100})
		if err != nil || len(page.Items) != 3 {
			t.Fatalf("query after prune: %d items, %v", len(page.Items), err)
		}
		return nil
	})
	// The chain goes on from the anchor.
	appendN(t, l, w, org, "delete_deployment", 2)
	_ = db.Update(func(tx *bolt.Tx) error {
		if rep := l.Verify(tx); len(rep.Breaks) != 0 {
			t.Fatalf("after appending past the anchor: %+v", rep)
		}
		// A forged anchor is caught.
		raw := tx.Bucket([]byte(bucketAnchors)).Get(org[:])
		var a anchor
		_ = json.Unmarshal(raw, &a)
		a.Seq = 4
		forged, _ := json.Marshal(a)
		_ = tx.Bucket([]byte(bucketAnchors)).Put(org[:], forged)
		if rep := l.Verify(tx); len(rep.Breaks) != 1 {
			t.Fatalf("forged anchor not detected: %+v", rep)
		}
		return nil
	})
}

func uidOf(t testing.TB, raw json.RawMessage) string {
	var e struct {
		Metadata struct {
			UID string `json:"uid"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatal(err)
	}
	return e.Metadata.UID
}

// TestPagingWithConcurrentInserts pages through 1,000 events in small pages
// while writers keep appending; every event present when paging started is
// seen exactly once, and nothing is seen twice.
func TestPagingWithConcurrentInserts(t *testing.T) {
	l, db, w := testLog(t)
	org, other := uuid.New(), uuid.New()
	appendN(t, l, w, org, "create_deployment", 1000)
	var before []string
	_ = db.View(func(tx *bolt.Tx) error {
		page, _ := l.Run(tx, Query{Org: org, End: time.Now().Add(time.Hour).UnixMilli(), Limit: 100000})
		for _, it := range page.Items {
			before = append(before, uidOf(t, it))
		}
		return nil
	})
	if len(before) != 1000 {
		t.Fatalf("%d events before paging", len(before))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				o := org
				if i%2 == 1 {
					o = other
				}
				_ = w.Update(func(tx *bolt.Tx) error { return l.Append(tx, entry(o, "update_deployment", i)) })
			}
		}(g)
	}
	end := time.Now().Add(time.Hour).UnixMilli()
	seen := map[string]bool{}
	var after *Position
	pages := 0
	for {
		var page Page
		_ = db.View(func(tx *bolt.Tx) error {
			var err error
			page, err = l.Run(tx, Query{Org: org, End: end, Limit: 37, After: after})
			if err != nil {
				t.Error(err)
			}
			return nil
		})
		for _, it := range page.Items {
			uid := uidOf(t, it)
			if seen[uid] {
				t.Fatalf("event %s seen twice", uid)
			}
			seen[uid] = true
		}
		pages++
		if page.Next == nil || pages > 10000 {
			break
		}
		// Round-trip through the opaque cursor, as a client does.
		after, _ = DecodeCursor(EncodeCursor(*page.Next))
		if len(seen) > 1500 {
			break // writers are faster than the pager; enough evidence
		}
	}
	close(stop)
	wg.Wait()
	for _, uid := range before {
		if !seen[uid] {
			t.Fatalf("event %s present before paging was skipped", uid)
		}
	}
	t.Logf("%d pages, %d distinct events", pages, len(seen))
}

func TestQueryFilters(t *testing.T) {
	l, db, w := testLog(t)
	org := uuid.New()
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	l.Now = func() time.Time { return now }
	ops := []string{"create_deployment", "update_deployment", "delete_deployment"}
	for i := 0; i < 30; i++ {
		now = t0.Add(time.Duration(i) * time.Minute)
		op := ops[i%3]
		if err := w.Update(func(tx *bolt.Tx) error {
			e := entry(org, op, i)
			if i%5 == 0 {
				e.Actor.WorkspaceID = "ws-2"
			}
			return l.Append(tx, e)
		}); err != nil {
			t.Fatal(err)
		}
	}
	run := func(q Query) int {
		q.Org = org
		if q.Limit == 0 {
			q.Limit = 100
		}
		var n int
		_ = db.View(func(tx *bolt.Tx) error {
			page, err := l.Run(tx, q)
			if err != nil {
				t.Fatal(err)
			}
			n = len(page.Items)
			return nil
		})
		return n
	}
	ms := func(i int) int64 { return t0.Add(time.Duration(i) * time.Minute).UnixMilli() }
	cases := []struct {
		name string
		q    Query
		want int
	}{
		{"all", Query{Start: ms(0), End: ms(29)}, 30},
		{"inclusive bounds", Query{Start: ms(10), End: ms(12)}, 3},
		{"single instant", Query{Start: ms(7), End: ms(7)}, 1},
		{"one op", Query{Start: ms(0), End: ms(29), Ops: []string{"update_deployment"}}, 10},
		{"two ops", Query{Start: ms(0), End: ms(29), Ops: []string{"update_deployment", "delete_deployment"}}, 20},
		{"repeated op", Query{Start: ms(0), End: ms(29), Ops: []string{"delete_deployment", "delete_deployment"}}, 10},
		{"op and window", Query{Start: ms(0), End: ms(5), Ops: []string{"create_deployment"}}, 2},
		{"workspace", Query{Start: ms(0), End: ms(29), Workspace: "ws-2"}, 6},
		{"limit", Query{Start: ms(0), End: ms(29), Limit: 7}, 7},
		{"other org", Query{Start: ms(0), End: ms(29), Org: uuid.New()}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			var n int
			if q.Org != uuid.Nil {
				_ = db.View(func(tx *bolt.Tx) error {
					page, _ := l.Run(tx, Query{Org: q.Org, Start: q.Start, End: q.End, Limit: 100})
					n = len(page.Items)
					return nil
				})
			} else {
				n = run(q)
			}
			if n != tc.want {
				t.Fatalf("got %d, want %d", n, tc.want)
			}
		})
	}
	// Multi-op merge keeps time order.
	_ = db.View(func(tx *bolt.Tx) error {
		page, _ := l.Run(tx, Query{Org: org, Start: ms(0), End: ms(29), Limit: 100, Ops: []string{"delete_deployment", "create_deployment"}})
		var last int64
		for _, it := range page.Items {
			var e struct{ Time int64 }
			_ = json.Unmarshal(it, &e)
			if e.Time < last {
				t.Fatal("merged results out of time order")
			}
			last = e.Time
		}
		return nil
	})
}

func TestActivityIDs(t *testing.T) {
	for op, want := range map[string]int{"create_api_key": 1, "update_ttl_settings": 3, "delete_workspace": 4,
		"list_access_policies": 2, "read_access_policy": 2, "invite_user_to_org": 99, "add_member_to_workspace": 99,
		"set_tenant_handle": 99} {
		if got := ActivityID(op); got != want {
			t.Errorf("%s: %d, want %d", op, got, want)
		}
	}
	for _, op := range Operations {
		if !Known(op) {
			t.Fatal(op)
		}
	}
}
