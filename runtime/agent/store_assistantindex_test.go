package agent

import (
	"cmp"
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

func genAssistants(n int, seed int64) []*Assistant {
	rng := rand.New(rand.NewSource(seed))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	graphs := []string{"agent", "Agent", "beta", "Gamma", "gamma2"}
	words := []string{"Alpha", "bravo", "Charlie", "delta", "ECHO", "alpha"}
	out := make([]*Assistant, 0, n)
	for i := 0; i < n; i++ {
		id := uuid.NewString()
		created := base.Add(time.Duration(rng.Intn(n/2)) * time.Second)
		meta := map[string]any{"team": fmt.Sprintf("t%d", rng.Intn(6)), "prod": rng.Intn(3) == 0}
		if rng.Intn(15) == 0 {
			meta["obj"] = map[string]any{"a": 1.0}
		}
		out = append(out, &Assistant{AssistantID: id, GraphID: graphs[rng.Intn(len(graphs))],
			Name:     words[rng.Intn(len(words))] + " " + words[rng.Intn(len(words))],
			Metadata: meta, Config: map[string]any{}, Version: 1,
			CreatedAt: created, UpdatedAt: created.Add(time.Duration(rng.Intn(3000)) * time.Millisecond)})
	}
	return out
}

func refAssistants(all []*Assistant, q AssistantQuery) ([]string, int) {
	var sel []*Assistant
	for _, a := range all {
		if q.GraphID != "" && a.GraphID != q.GraphID || q.Name != "" && !strings.Contains(strings.ToLower(a.Name), strings.ToLower(q.Name)) ||
			!matches(a.Metadata, q.Metadata) {
			continue
		}
		sel = append(sel, a)
	}
	slices.SortFunc(sel, func(a, b *Assistant) int {
		id := strings.Compare(a.AssistantID, b.AssistantID)
		var c int
		switch q.SortBy {
		case "assistant_id":
			c = id
		case "graph_id":
			c = cmp.Or(strings.Compare(strings.ToLower(a.GraphID), strings.ToLower(b.GraphID)), id)
		case "name":
			c = cmp.Or(strings.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)), id)
		case "updated_at":
			c = cmp.Or(a.UpdatedAt.Compare(b.UpdatedAt), id)
		default:
			c = cmp.Or(a.CreatedAt.Compare(b.CreatedAt), id)
		}
		if q.Desc {
			return -c
		}
		return c
	})
	n := len(sel)
	sel = sel[min(q.Offset, len(sel)):]
	if q.Limit > 0 && len(sel) > q.Limit {
		sel = sel[:q.Limit]
	}
	ids := make([]string, len(sel))
	for i, a := range sel {
		ids[i] = a.AssistantID
	}
	return ids, n
}

// TestAssistantSearchMatchesBruteForce: every sort in both directions,
// with the graph_id, name and metadata filters alone and combined, pages
// and counts as the reference implementation, with the intersection
// sorted in memory and with the sort index walked.
func TestAssistantSearchMatchesBruteForce(t *testing.T) {
	s, _ := openIndexStore(t)
	all := genAssistants(1500, 11)
	mustUpdate(t, s, func(tx Tx) error {
		for _, a := range all {
			if err := tx.PutAssistant(a); err != nil {
				return err
			}
		}
		// A replaced and a deleted assistant leave no index rows behind.
		all[0].GraphID, all[0].Name, all[0].Metadata = "beta", "renamed", map[string]any{"team": "t9"}
		if err := tx.PutAssistant(all[0]); err != nil {
			return err
		}
		return tx.DeleteAssistant(all[1].AssistantID)
	})
	all = slices.Delete(all, 1, 2)

	filters := []struct {
		name string
		q    AssistantQuery
	}{
		{"none", AssistantQuery{}},
		{"graph", AssistantQuery{GraphID: "agent"}},
		{"graph none", AssistantQuery{GraphID: "nope"}},
		{"meta", AssistantQuery{Metadata: map[string]any{"team": "t2"}}},
		{"graph meta", AssistantQuery{GraphID: "Gamma", Metadata: map[string]any{"team": "t2", "prod": true}}},
		{"name", AssistantQuery{Name: "ALPHA"}},
		{"name graph", AssistantQuery{Name: "echo", GraphID: "beta"}},
		{"meta object", AssistantQuery{Metadata: map[string]any{"obj": map[string]any{"a": 1.0}}}},
		{"renamed", AssistantQuery{Metadata: map[string]any{"team": "t9"}}},
	}
	for _, bound := range []int{collectBound, 20} {
		saved := collectBound
		collectBound = bound
		for _, fc := range filters {
			for _, by := range []string{"", "created_at", "updated_at", "assistant_id", "graph_id", "name"} {
				for _, desc := range []bool{false, true} {
					for _, pg := range [][2]int{{0, 10}, {11, 10}, {0, 0}} {
						q := fc.q
						q.SortBy, q.Desc, q.Offset, q.Limit = by, desc, pg[0], pg[1]
						want, wantN := refAssistants(all, q)
						var got []string
						n := wantN
						mustView(t, s, func(tx ReadTx) error {
							list, err := tx.SearchAssistants(q)
							for _, a := range list {
								got = append(got, a.AssistantID)
							}
							if err == nil && by == "" && !desc && pg[0] == 0 {
								n, err = tx.CountAssistants(q)
							}
							return err
						})
						if !slices.Equal(got, want) || n != wantN {
							t.Errorf("bound %d, %s, sort %q desc %v, page %v: got %d (count %d), want %d (count %d)\n got  %.3q\n want %.3q",
								bound, fc.name, by, desc, pg, len(got), n, len(want), wantN, got, want)
						}
					}
				}
			}
		}
		collectBound = saved
	}
}

// TestAssistantIndexMigration: migration 8 over assistants written
// before it builds the rows live writes keep.
func TestAssistantIndexMigration(t *testing.T) {
	recs := genAssistants(300, 12)
	old, err := storage.Open(t.TempDir()+"/agent.db", time.Second, Migrations[:7])
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := old.Update(func(tx *bolt.Tx) error {
		for _, a := range recs {
			if err := putJSON(tx.Bucket([]byte(bAssistants)), a.AssistantID, a); err != nil {
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
		for _, a := range recs {
			if err := tx.PutAssistant(a); err != nil {
				return err
			}
		}
		return nil
	})
	dump := func(db *bolt.DB) map[string][]string {
		out := map[string][]string{}
		_ = db.View(func(tx *bolt.Tx) error {
			for _, name := range assistantIndexBuckets {
				_ = tx.Bucket([]byte(name)).ForEach(func(k, v []byte) error {
					out[name] = append(out[name], fmt.Sprintf("%x=%x", k, v))
					return nil
				})
			}
			return nil
		})
		return out
	}
	// A bare store creates no system assistants: both hold exactly recs.
	got, want := dump(old), dump(db)
	for _, name := range assistantIndexBuckets {
		if !slices.Equal(got[name], want[name]) || len(want[name]) < len(recs) {
			t.Errorf("bucket %s: migrated %d rows, live %d", name, len(got[name]), len(want[name]))
		}
	}
}
