package controlplane

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

// TestDeploymentPagesMatchBruteForce fills two workspaces with deployments
// whose names share many pieces (a small alphabet), deletes some, and
// compares every page workspaceDeploymentPage returns — by offset and by
// cursor chains, with name_contains of every length, ids and a status
// filter — with the same query answered by filtering all records in
// memory.
func TestDeploymentPagesMatchBruteForce(t *testing.T) {
	db, err := storage.Open(filepath.Join(t.TempDir(), "db"), time.Second, storage.ControlPlaneMigrations)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	wsA, wsB := storage.NewID(), storage.NewID()
	statuses := []string{DeploymentReady, DeploymentUnused, DeploymentUnknown}
	type rec struct {
		id           uuid.UUID
		name, status string
	}
	var all []rec // creation order
	names := map[string]bool{}
	err = db.Update(func(tx *bolt.Tx) error {
		for i := 0; i < 600; i++ {
			ws := wsA
			if i%5 == 0 {
				ws = wsB
			}
			var name string
			for name == "" || names[ws.String()+name] {
				n := 2 + rng.IntN(8)
				var b strings.Builder
				for j := 0; j < n; j++ {
					b.WriteByte("abc-1"[rng.IntN(5)])
				}
				name = "a" + b.String()
			}
			names[ws.String()+name] = true
			id := storage.NewID()
			d := &deploymentRecord{Deployment: Deployment{ID: id.String(), Name: name, TenantID: ws.String(), Status: statuses[rng.IntN(3)]}}
			if err := insertDeployment(tx, ws, d); err != nil {
				return err
			}
			if ws == wsA {
				all = append(all, rec{id, name, d.Status})
			}
		}
		// Remove a third of workspace A's, with their index entries.
		kept := all[:0]
		for i, r := range all {
			if i%3 == 1 {
				d, err := readDeployment(tx, r.id)
				if err != nil {
					return err
				}
				if err := removeDeploymentRecords(tx, d); err != nil {
					return err
				}
				continue
			}
			kept = append(kept, r)
		}
		all = kept
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(all) // newest first, as the list answers

	brute := func(q deploymentQuery) []uuid.UUID {
		var out []uuid.UUID
		started := q.After == uuid.Nil
		for _, r := range all {
			if !started {
				started = r.id == q.After
				continue
			}
			if q.IDs != nil && !q.IDs[r.id.String()] || !strings.Contains(r.name, q.NameContains) ||
				q.Match != nil && !q.Match(&deploymentRecord{Deployment: Deployment{Status: r.status}}) {
				continue
			}
			out = append(out, r.id)
		}
		if q.Offset >= len(out) {
			return nil
		}
		return out[q.Offset:min(len(out), q.Offset+q.Limit)]
	}
	page := func(q deploymentQuery) ([]uuid.UUID, bool) {
		var ids []uuid.UUID
		var more bool
		err := db.View(func(tx *bolt.Tx) error {
			p, m, err := workspaceDeploymentPage(tx, wsA, q)
			for _, d := range p {
				ids = append(ids, uuid.MustParse(d.ID))
			}
			more = m
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return ids, more
	}
	onlyReady := func(d *deploymentRecord) bool { return d.Status == DeploymentReady }
	someIDs := map[string]bool{}
	for i := 0; i < len(all); i += 4 {
		someIDs[all[i].id.String()] = true
	}
	var queries []deploymentQuery
	for _, nc := range []string{"", "a", "b-", "abc", "c-1", "a1b", "--", "aaa", "ab-c", "zzz", "1c-a", all[7].name, all[40].name} {
		for _, match := range []func(*deploymentRecord) bool{nil, onlyReady} {
			for _, ids := range []map[string]bool{nil, someIDs} {
				queries = append(queries, deploymentQuery{NameContains: nc, Match: match, IDs: ids})
			}
		}
	}
	for _, q := range queries {
		for _, limit := range []int{1, 7, 100} {
			q.Limit = limit
			// By offset.
			for _, off := range []int{0, 3, 50} {
				q.Offset, q.After = off, uuid.Nil
				got, _ := page(q)
				if want := brute(q); !slices.Equal(got, want) {
					t.Fatalf("%+v: page %v, want %v", q, got, want)
				}
			}
			// By cursor: the chain of pages covers the brute-force list.
			q.Offset, q.After = 0, uuid.Nil
			full := brute(deploymentQuery{NameContains: q.NameContains, Match: q.Match, IDs: q.IDs, Limit: len(all)})
			var walked []uuid.UUID
			for n := 0; ; n++ {
				got, more := page(q)
				walked = append(walked, got...)
				if !more {
					break
				}
				if n > len(all) {
					t.Fatal("cursor chain never ends")
				}
				q.After = got[len(got)-1]
			}
			if !slices.Equal(walked, full) {
				t.Fatalf("name_contains %q limit %d: cursor chain %d deployments, want %d", q.NameContains, limit, len(walked), len(full))
			}
		}
	}
	if testing.Verbose() {
		fmt.Println("queries checked:", len(queries))
	}
}
