package agent

import (
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

func genCrons(n int, seed int64) []*Cron {
	rng := rand.New(rand.NewSource(seed))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	assistants := []string{uuid.NewString(), uuid.NewString(), uuid.NewString()}
	threads := []string{uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString()}
	out := make([]*Cron, 0, n)
	for i := 0; i < n; i++ {
		created := base.Add(time.Duration(rng.Intn(n/2)) * time.Second)
		c := &Cron{CronID: uuid.NewString(), AssistantID: assistants[rng.Intn(len(assistants))], Schedule: "* * * * *",
			NextRunDate: base.Add(time.Duration(rng.Intn(n)) * time.Minute), Enabled: rng.Intn(3) > 0,
			Metadata:  map[string]any{"k": fmt.Sprintf("v%d", rng.Intn(4)), "on": rng.Intn(2) == 0},
			CreatedAt: created, UpdatedAt: created.Add(time.Duration(rng.Intn(100)) * time.Second)}
		if rng.Intn(3) > 0 {
			c.ThreadID = &threads[rng.Intn(len(threads))]
		}
		if rng.Intn(2) == 0 {
			end := created.Add(time.Duration(rng.Intn(1000)) * time.Hour)
			c.EndTime = &end
		}
		if rng.Intn(10) == 0 {
			c.Metadata["obj"] = map[string]any{"x": 1.0}
		}
		out = append(out, c)
	}
	return out
}

// refCrons is the search as it was before the indexes: every cron
// tested, sorted by its sort text ‖ 0x00 ‖ id.
func refCrons(all []*Cron, f CronFilter) ([]string, int) {
	var sel []*Cron
	for _, c := range all {
		if f.AssistantID != "" && c.AssistantID != f.AssistantID ||
			f.ThreadID != "" && (c.ThreadID == nil || *c.ThreadID != f.ThreadID) ||
			f.Enabled != nil && c.Enabled != *f.Enabled || !matches(c.Metadata, f.Metadata) {
			continue
		}
		sel = append(sel, c)
	}
	key := func(c *Cron) string {
		switch f.SortBy {
		case "cron_id":
			return c.CronID
		case "assistant_id":
			return c.AssistantID
		case "thread_id":
			if c.ThreadID == nil {
				return ""
			}
			return *c.ThreadID
		case "next_run_date":
			return cronTS(&c.NextRunDate)
		case "end_time":
			return cronTS(c.EndTime)
		case "updated_at":
			return cronTS(&c.UpdatedAt)
		}
		return cronTS(&c.CreatedAt)
	}
	desc := f.Desc || f.SortBy == ""
	sort.SliceStable(sel, func(i, j int) bool {
		ki, kj := key(sel[i])+"\x00"+sel[i].CronID, key(sel[j])+"\x00"+sel[j].CronID
		if desc {
			return ki > kj
		}
		return ki < kj
	})
	n := len(sel)
	sel = sel[min(f.Offset, len(sel)):]
	if f.Limit > 0 && len(sel) > f.Limit {
		sel = sel[:f.Limit]
	}
	ids := make([]string, len(sel))
	for i, c := range sel {
		ids[i] = c.CronID
	}
	return ids, n
}

// TestCronSearchMatchesBruteForce: every cron sort in both directions
// with the assistant_id, thread_id, enabled and metadata filters, alone
// and combined, pages and counts as the search before the indexes; a
// thread's crons are found by its posting.
func TestCronSearchMatchesBruteForce(t *testing.T) {
	s, _ := openIndexStore(t)
	all := genCrons(800, 21)
	mustUpdate(t, s, func(tx Tx) error {
		for _, c := range all {
			if err := tx.PutCron(c); err != nil {
				return err
			}
		}
		// An update of every indexed field and a deletion.
		all[0].AssistantID, all[0].ThreadID, all[0].Enabled, all[0].Metadata = all[1].AssistantID, nil, !all[0].Enabled, map[string]any{"k": "moved"}
		if err := tx.PutCron(all[0]); err != nil {
			return err
		}
		return tx.DeleteCron(all[2].CronID)
	})
	all = slices.Delete(all, 2, 3)
	yes, no := true, false
	var thread string
	for _, c := range all {
		if c.ThreadID != nil {
			thread = *c.ThreadID
			break
		}
	}
	filters := []CronFilter{
		{}, {AssistantID: all[5].AssistantID}, {ThreadID: thread}, {Enabled: &yes}, {Enabled: &no, AssistantID: all[7].AssistantID},
		{Metadata: map[string]any{"k": "v1"}}, {Metadata: map[string]any{"k": "v2", "on": true}, ThreadID: thread},
		{Metadata: map[string]any{"obj": map[string]any{"x": 1.0}}}, {Metadata: map[string]any{"k": "moved"}},
	}
	for _, bound := range []int{collectBound, 15} {
		saved := collectBound
		collectBound = bound
		for fi, base := range filters {
			for _, by := range []string{"", "cron_id", "assistant_id", "thread_id", "next_run_date", "end_time", "created_at", "updated_at"} {
				for _, desc := range []bool{false, true} {
					for _, pg := range [][2]int{{0, 10}, {9, 10}, {0, 0}} {
						f := base
						f.SortBy, f.Desc, f.Offset, f.Limit = by, desc, pg[0], pg[1]
						want, wantN := refCrons(all, f)
						var got []string
						n := wantN
						mustView(t, s, func(tx ReadTx) error {
							list, err := tx.SearchCrons(f)
							for _, c := range list {
								got = append(got, c.CronID)
							}
							if err == nil && by == "" && !desc && pg[0] == 0 {
								n, err = tx.CountCrons(f)
							}
							return err
						})
						if !slices.Equal(got, want) || n != wantN {
							t.Errorf("bound %d, filter %d, sort %q desc %v, page %v: got %d (count %d), want %d (count %d)",
								bound, fi, by, desc, pg, len(got), n, len(want), wantN)
						}
					}
				}
			}
		}
		collectBound = saved
	}
	var want, got []string
	for _, c := range all {
		if c.ThreadID != nil && *c.ThreadID == thread {
			want = append(want, c.CronID)
		}
	}
	mustView(t, s, func(tx ReadTx) error { var err error; got, err = tx.CronsOf("", thread); return err })
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("crons of the thread: %d, want %d", len(got), len(want))
	}
}

// TestCronIndexMigration: migration 9 over crons written before it
// builds the rows live writes keep.
func TestCronIndexMigration(t *testing.T) {
	recs := genCrons(200, 22)
	old, err := storage.Open(t.TempDir()+"/agent.db", time.Second, Migrations[:8])
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := old.Update(func(tx *bolt.Tx) error {
		for _, c := range recs {
			if err := putJSON(tx.Bucket([]byte(bCrons)), c.CronID, c); err != nil {
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
	s, db := openIndexStore(t)
	mustUpdate(t, s, func(tx Tx) error {
		for _, c := range recs {
			if err := tx.PutCron(c); err != nil {
				return err
			}
		}
		return nil
	})
	dump := func(db *bolt.DB) map[string][]string {
		out := map[string][]string{}
		_ = db.View(func(tx *bolt.Tx) error {
			for _, name := range cronIndexBuckets {
				_ = tx.Bucket([]byte(name)).ForEach(func(k, v []byte) error {
					out[name] = append(out[name], fmt.Sprintf("%x=%x", k, v))
					return nil
				})
			}
			return nil
		})
		return out
	}
	got, want := dump(old), dump(db)
	for _, name := range cronIndexBuckets {
		if !slices.Equal(got[name], want[name]) || len(want[name]) < len(recs) {
			t.Errorf("bucket %s: migrated %d rows, live %d", name, len(got[name]), len(want[name]))
		}
	}
}
