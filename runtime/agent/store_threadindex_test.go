package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

// openIndexStore is a bbolt store on a fresh database with every
// migration, its journal flushed every 10 ms.
func openIndexStore(t testing.TB) (*boltStore, *bolt.DB) {
	t.Helper()
	s := openFlushStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.run(ctx, 10*time.Millisecond, func(err error) { t.Error(err) }) }()
	// Before openFlushStore's cleanup closes the journal and the database.
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return s, s.db
}

// genThreads makes n threads whose creation and update times, statuses,
// metadata and values vary, with ties in the times (so the id tie-break
// counts) and ids that are not in creation order (half random UUIDv4).
func genThreads(n int, seed int64) []*threadRecord {
	rng := rand.New(rand.NewSource(seed))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	statuses := []string{ThreadIdle, ThreadBusy, ThreadInterrupted, ThreadError}
	out := make([]*threadRecord, 0, n)
	for i := 0; i < n; i++ {
		id := storage.NewID().String()
		if rng.Intn(2) == 0 {
			id = uuid.NewString()
		}
		created := base.Add(time.Duration(rng.Intn(n/2)) * time.Second)
		updated := created.Add(time.Duration(rng.Intn(5000)) * time.Millisecond)
		meta := map[string]any{"n": float64(rng.Intn(5)), "flag": rng.Intn(2) == 0}
		if rng.Intn(10) > 0 {
			meta["user"] = fmt.Sprintf("u%d", rng.Intn(10))
		}
		switch rng.Intn(20) {
		case 0:
			meta["obj"] = map[string]any{"x": 1.0}
		case 1:
			meta["long"] = strings.Repeat("y", maxMetaValueLen+10)
		case 2:
			meta["nil"] = nil
		}
		r := &threadRecord{Thread: Thread{ThreadID: id, CreatedAt: created, UpdatedAt: updated, Metadata: meta,
			Status: statuses[rng.Intn(len(statuses))], Values: map[string]any{"v": float64(i % 7)}}}
		switch rng.Intn(50) {
		case 0:
			r.Active = storage.NewID().String()
		case 1:
			r.Queue = []string{storage.NewID().String()}
		}
		out = append(out, r)
	}
	return out
}

func putThreads(t *testing.T, s Store, recs []*threadRecord) {
	t.Helper()
	mustUpdate(t, s, func(tx Tx) error {
		for _, r := range recs {
			if err := tx.PutThread(r); err != nil {
				return err
			}
		}
		return nil
	})
}

// refSearch is the brute-force reference: every record tested, all
// sorted, then paged.
func refSearch(all []*threadRecord, f ThreadFilter) ([]string, int) {
	ids := map[string]bool{}
	for _, id := range f.IDs {
		ids[id] = true
	}
	var sel []*threadRecord
	for _, r := range all {
		if len(ids) > 0 && !ids[r.ThreadID] || f.Status != "" && r.Status != f.Status ||
			!matches(r.Metadata, f.Metadata) || !matches(r.Values, f.Values) {
			continue
		}
		sel = append(sel, r)
	}
	slices.SortFunc(sel, func(a, b *threadRecord) int {
		var c int
		switch f.SortBy {
		case "thread_id":
			c = strings.Compare(a.ThreadID, b.ThreadID)
		case "updated_at":
			c = cmp.Or(a.UpdatedAt.Compare(b.UpdatedAt), strings.Compare(a.ThreadID, b.ThreadID))
		case "status":
			c = cmp.Or(strings.Compare(a.Status, b.Status), a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ThreadID, b.ThreadID))
		default:
			c = cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ThreadID, b.ThreadID))
		}
		if f.Desc {
			return -c
		}
		return c
	})
	n := len(sel)
	sel = sel[min(f.Offset, len(sel)):]
	if f.Limit > 0 && len(sel) > f.Limit {
		sel = sel[:f.Limit]
	}
	out := make([]string, len(sel))
	for i, r := range sel {
		out[i] = r.ThreadID
	}
	return out, n
}

// TestThreadSearchMatchesBruteForce: over 3,000 generated threads, every
// sort in both directions with every filter (alone and combined) and
// offsets returns the reference's page, and count its total, both with
// the intersection sorted in memory and with the sort index walked.
func TestThreadSearchMatchesBruteForce(t *testing.T) {
	s, _ := openIndexStore(t)
	all := genThreads(3000, 1)
	putThreads(t, s, all)
	someIDs := []string{uuid.NewString()} // one missing
	for i := 0; i < len(all); i += 41 {
		someIDs = append(someIDs, all[i].ThreadID)
	}
	filters := []struct {
		name string
		f    ThreadFilter
	}{
		{"none", ThreadFilter{}},
		{"status", ThreadFilter{Status: ThreadBusy}},
		{"meta string", ThreadFilter{Metadata: map[string]any{"user": "u3"}}},
		{"meta number and bool", ThreadFilter{Metadata: map[string]any{"n": 2.0, "flag": true}}},
		{"meta and status", ThreadFilter{Metadata: map[string]any{"user": "u7"}, Status: ThreadIdle}},
		{"meta no match", ThreadFilter{Metadata: map[string]any{"user": "nobody"}}},
		{"meta object (not indexed)", ThreadFilter{Metadata: map[string]any{"obj": map[string]any{"x": 1.0}}}},
		{"meta long (not indexed)", ThreadFilter{Metadata: map[string]any{"long": strings.Repeat("y", maxMetaValueLen+10)}}},
		{"meta null (not indexed)", ThreadFilter{Metadata: map[string]any{"nil": nil, "user": "u1"}}},
		{"values", ThreadFilter{Values: map[string]any{"v": 3.0}}},
		{"values status meta", ThreadFilter{Values: map[string]any{"v": 3.0}, Status: ThreadError, Metadata: map[string]any{"flag": false}}},
		{"ids", ThreadFilter{IDs: someIDs}},
		{"ids status", ThreadFilter{IDs: someIDs, Status: ThreadInterrupted}},
	}
	pages := [][2]int{{0, 10}, {13, 10}, {0, 0}, {2995, 10}}
	for _, bound := range []int{collectBound, 20} {
		saved := collectBound
		collectBound = bound
		for _, fc := range filters {
			for _, by := range []string{"", "created_at", "updated_at", "thread_id", "status"} {
				if bound != saved && by != "updated_at" && by != "thread_id" {
					continue // the only orders collectBound changes
				}
				for _, desc := range []bool{false, true} {
					for _, pg := range pages {
						if pg[1] == 0 && (bound != saved || by != "") {
							continue // the whole list once per filter and direction
						}
						f := fc.f
						f.SortBy, f.Desc, f.Offset, f.Limit = by, desc, pg[0], pg[1]
						want, wantN := refSearch(all, f)
						var got []string
						var n int
						mustView(t, s, func(tx ReadTx) error {
							recs, err := tx.SearchThreads(f)
							for _, r := range recs {
								got = append(got, r.ThreadID)
							}
							if err != nil {
								return err
							}
							n = wantN
							if by == "" && !desc && pg[0] == 0 {
								// A count ignores order and page: once per filter.
								n, err = tx.CountThreads(f)
							}
							return err
						})
						if !slices.Equal(got, want) || n != wantN {
							t.Errorf("bound %d, %s, sort %q desc %v, offset %d limit %d: got %d threads (count %d), want %d (count %d)\n got  %.3q\n want %.3q",
								bound, fc.name, by, desc, pg[0], pg[1], len(got), n, len(want), wantN, got, want)
						}
					}
				}
			}
		}
		collectBound = saved
	}
}

// TestThreadSearchDecodesOnlyThePage: a limit-10 search over 3,000
// threads decodes O(limit) records for every sort and indexed filter,
// and count decodes none.
func TestThreadSearchDecodesOnlyThePage(t *testing.T) {
	s, _ := openIndexStore(t)
	putThreads(t, s, genThreads(3000, 2))
	for _, f := range []ThreadFilter{
		{}, {Status: ThreadIdle}, {Metadata: map[string]any{"user": "u2"}},
		{Status: ThreadError, Metadata: map[string]any{"user": "u2", "flag": true}},
	} {
		for _, by := range []string{"", "created_at", "updated_at", "thread_id", "status"} {
			for _, desc := range []bool{false, true} {
				f.SortBy, f.Desc, f.Limit = by, desc, 10
				before := threadDecodes.Load()
				var got int
				mustView(t, s, func(tx ReadTx) error {
					recs, err := tx.SearchThreads(f)
					got = len(recs)
					return err
				})
				if d := threadDecodes.Load() - before; d > 10 || got != 10 {
					t.Errorf("%+v: %d threads, %d records decoded; want 10 and at most 10", f, got, d)
				}
				before = threadDecodes.Load()
				mustView(t, s, func(tx ReadTx) error { _, err := tx.CountThreads(f); return err })
				if d := threadDecodes.Load() - before; d != 0 {
					t.Errorf("count %+v decoded %d records", f, d)
				}
			}
		}
	}
}

// TestThreadSearchBoundsUnindexedFilters: a values filter decodes at most
// maxResidualScan records and is refused (ErrInvalid) beyond.
func TestThreadSearchBoundsUnindexedFilters(t *testing.T) {
	s, _ := openIndexStore(t)
	putThreads(t, s, genThreads(300, 3))
	saved := maxResidualScan
	maxResidualScan = 50
	defer func() { maxResidualScan = saved }()
	f := ThreadFilter{Values: map[string]any{"v": 99.0}, Limit: 10}
	err := s.View(context.Background(), func(tx ReadTx) error { _, err := tx.SearchThreads(f); return err })
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("search: %v, want ErrInvalid", err)
	}
	err = s.View(context.Background(), func(tx ReadTx) error { _, err := tx.CountThreads(f); return err })
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("count: %v, want ErrInvalid", err)
	}
	// Narrowed by an indexed filter below the bound, it is served.
	f.Metadata = map[string]any{"user": "u1", "n": 1.0}
	if err := s.View(context.Background(), func(tx ReadTx) error { _, err := tx.SearchThreads(f); return err }); err != nil {
		t.Fatalf("narrowed search: %v", err)
	}
}

// TestRecoveryReadsOnlyBusyThreads: start-up recovery finds exactly the
// threads with a running or queued run, decoding only those among 3,000.
func TestRecoveryReadsOnlyBusyThreads(t *testing.T) {
	s, db := openIndexStore(t)
	all := genThreads(3000, 6)
	putThreads(t, s, all)
	var wantQueued, wantPending []string
	busy := 0
	for _, r := range all {
		if r.busy() {
			busy++
		}
		if len(r.Queue) > 0 {
			wantQueued = append(wantQueued, r.ThreadID)
			wantPending = append(wantPending, r.Queue...)
		}
	}
	if busy < 20 {
		t.Fatalf("only %d busy threads generated", busy)
	}
	e := &Engine{DB: db, store: s}
	before := threadDecodes.Load()
	queued, pending, err := e.recover()
	if err != nil {
		t.Fatal(err)
	}
	if d := threadDecodes.Load() - before; d > int64(2*busy) {
		t.Errorf("recovery decoded %d thread records for %d busy threads", d, busy)
	}
	slices.Sort(queued)
	slices.Sort(wantQueued)
	slices.Sort(pending)
	slices.Sort(wantPending)
	if !slices.Equal(queued, wantQueued) || !slices.Equal(pending, wantPending) {
		t.Fatalf("recovered %d queued threads and %d runs, want %d and %d", len(queued), len(pending), len(wantQueued), len(wantPending))
	}
	// The running runs ended: their threads left the busy index, the
	// queued ones stayed.
	var left []string
	_ = db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bThreadsBusy)).ForEach(func(k, _ []byte) error { left = append(left, string(k)); return nil })
	})
	slices.Sort(left)
	if !slices.Equal(left, wantQueued) {
		t.Fatalf("busy index after recovery: %d threads, want the %d queued", len(left), len(wantQueued))
	}
	mustView(t, s, func(tx ReadTx) error {
		for _, r := range all {
			if r.Active == "" {
				continue
			}
			got, err := tx.GetThread(r.ThreadID)
			if err != nil || got.Active != "" || got.Status != ThreadError && got.Status != ThreadBusy {
				return fmt.Errorf("thread %s after recovery: %+v %v", r.ThreadID, got, err)
			}
		}
		return nil
	})
}

// BenchmarkThreadSearch: a limit-10 search (default sort, and by status
// with a metadata filter) and a count at 1,000, 10,000 and 100,000
// threads; the time per search should not grow with the threads.
func BenchmarkThreadSearch(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		s, _ := openIndexStore(b)
		recs := genThreads(n, 7)
		for i := 0; i < len(recs); i += 10_000 {
			if err := s.Update(context.Background(), func(tx Tx) error {
				for _, r := range recs[i:min(i+10_000, len(recs))] {
					if err := tx.PutThread(r); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
		}
		for _, c := range []struct {
			name string
			f    ThreadFilter
		}{
			{"default", ThreadFilter{Limit: 10, Desc: true}},
			{"status+meta", ThreadFilter{Limit: 10, Desc: true, SortBy: "status", Status: ThreadIdle, Metadata: map[string]any{"user": "u1"}}},
			{"updated+meta", ThreadFilter{Limit: 10, Desc: true, SortBy: "updated_at", Metadata: map[string]any{"user": "u1"}}},
		} {
			b.Run(fmt.Sprintf("%s/%d", c.name, n), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if err := s.View(context.Background(), func(tx ReadTx) error { _, err := tx.SearchThreads(c.f); return err }); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(fmt.Sprintf("count-status/%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if err := s.View(context.Background(), func(tx ReadTx) error {
					_, err := tx.CountThreads(ThreadFilter{Status: ThreadIdle})
					return err
				}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
