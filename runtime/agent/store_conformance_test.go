package agent

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"slipway/storage"
)

// runStoreConformance checks the Store contract (store.go) on the stores
// open makes, each empty: any implementation runs it from its own test.
func runStoreConformance(t *testing.T, open func(t *testing.T) Store) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s Store)
	}{
		{"threads CRUD and listing", func(t *testing.T, s Store) {
			a, b := newThreadRec("meta-a"), newThreadRec("meta-b")
			b.Graph = "g"
			b.Active, b.Queue = "", []string{storage.NewID().String()}
			mustUpdate(t, s, func(tx Tx) error {
				if err := tx.PutThread(a); err != nil {
					return err
				}
				return tx.PutThread(b)
			})
			mustView(t, s, func(tx ReadTx) error {
				got, err := tx.GetThread(a.ThreadID)
				if err != nil || got.ThreadID != a.ThreadID || got.Metadata["k"] != "meta-a" {
					t.Errorf("GetThread = %+v, %v", got, err)
				}
				if !tx.ThreadExists(b.ThreadID) || tx.ThreadExists(storage.NewID().String()) {
					t.Error("ThreadExists disagrees with what was put")
				}
				active, queue, err := tx.ThreadQueue(b.ThreadID)
				if err != nil || active != "" || !reflect.DeepEqual(queue, b.Queue) {
					t.Errorf("ThreadQueue = %q %v %v", active, queue, err)
				}
				g, md, err := tx.ThreadGraph(b.ThreadID)
				if err != nil || g != "g" || md["k"] != "meta-b" {
					t.Errorf("ThreadGraph = %q %v %v", g, md, err)
				}
				var ids []string
				if err := tx.ForEachThread(func(r *threadRecord) error { ids = append(ids, r.ThreadID); return nil }); err != nil {
					return err
				}
				if !reflect.DeepEqual(ids, []string{a.ThreadID, b.ThreadID}) {
					t.Errorf("ForEachThread = %v, want creation order", ids)
				}
				return nil
			})
			mustUpdate(t, s, func(tx Tx) error { return tx.DeleteThreadRecord(a.ThreadID) })
			mustView(t, s, func(tx ReadTx) error {
				if _, err := tx.GetThread(a.ThreadID); !errors.Is(err, ErrNotFound) {
					t.Errorf("a deleted thread: %v, want ErrNotFound", err)
				}
				if _, _, err := tx.ThreadQueue(a.ThreadID); !errors.Is(err, ErrNotFound) {
					t.Errorf("a deleted thread's queue: %v, want ErrNotFound", err)
				}
				return nil
			})
		}},
		{"runs CRUD and a thread's index", func(t *testing.T, s Store) {
			th := newThreadRec("")
			nb := time.Now().UTC().Add(time.Hour).Truncate(time.Millisecond)
			r1, r2 := newRunRec(th.ThreadID), newRunRec(th.ThreadID)
			r2.NotBefore = &nb
			mustUpdate(t, s, func(tx Tx) error {
				for _, r := range []*runRecord{r1, r2} {
					if err := tx.PutRun(r); err != nil {
						return err
					}
					if err := tx.IndexRun(th.ThreadID, r.RunID); err != nil {
						return err
					}
				}
				return tx.PutThread(th)
			})
			mustView(t, s, func(tx ReadTx) error {
				ids, err := tx.ThreadRunIDs(th.ThreadID)
				if err != nil || !reflect.DeepEqual(ids, []string{r1.RunID, r2.RunID}) {
					t.Errorf("ThreadRunIDs = %v %v", ids, err)
				}
				got, err := tx.GetRun(r2.RunID)
				if err != nil || got.ThreadID != th.ThreadID || got.Status != RunPending {
					t.Errorf("GetRun = %+v %v", got, err)
				}
				if at, err := tx.RunNotBefore(r2.RunID); err != nil || at == nil || !at.Equal(nb) {
					t.Errorf("RunNotBefore = %v %v, want %v", at, err, nb)
				}
				if at, err := tx.RunNotBefore(r1.RunID); err != nil || at != nil {
					t.Errorf("RunNotBefore of a run without one = %v %v", at, err)
				}
				return nil
			})
			mustUpdate(t, s, func(tx Tx) error { return tx.DeleteRun(th.ThreadID, r1.RunID) })
			mustView(t, s, func(tx ReadTx) error {
				if _, err := tx.GetRun(r1.RunID); !errors.Is(err, ErrNotFound) {
					t.Errorf("a deleted run: %v", err)
				}
				if ids, _ := tx.ThreadRunIDs(th.ThreadID); !reflect.DeepEqual(ids, []string{r2.RunID}) {
					t.Errorf("index after DeleteRun = %v", ids)
				}
				return nil
			})
			mustUpdate(t, s, func(tx Tx) error { return tx.DeleteThreadRuns(th.ThreadID) })
			mustView(t, s, func(tx ReadTx) error {
				if _, err := tx.GetRun(r2.RunID); !errors.Is(err, ErrNotFound) {
					t.Errorf("a run of a thread whose runs were deleted: %v", err)
				}
				if ids, _ := tx.ThreadRunIDs(th.ThreadID); len(ids) != 0 {
					t.Errorf("index after DeleteThreadRuns = %v", ids)
				}
				return nil
			})
		}},
		{"checkpoints in sequence", func(t *testing.T, s Store) {
			th := newThreadRec("")
			other := newThreadRec("")
			mustUpdate(t, s, func(tx Tx) error {
				for seq := uint64(1); seq <= 3; seq++ {
					cp := &Checkpoint{Values: map[string]any{"n": float64(seq)},
						Checkpoint: CheckpointRef{ThreadID: th.ThreadID, CheckpointID: storage.NewID().String()}}
					if err := tx.PutCheckpoint(th.ThreadID, seq, cp); err != nil {
						return err
					}
				}
				return tx.PutCheckpoint(other.ThreadID, 1, &Checkpoint{Checkpoint: CheckpointRef{ThreadID: other.ThreadID}})
			})
			mustView(t, s, func(tx ReadTx) error {
				cp, err := tx.GetCheckpoint(th.ThreadID, 2)
				if err != nil || cp.Values["n"] != float64(2) {
					t.Errorf("GetCheckpoint = %+v %v", cp, err)
				}
				ref, err := tx.CheckpointRefAt(th.ThreadID, 3)
				if err != nil || ref.ThreadID != th.ThreadID || ref.CheckpointID == "" {
					t.Errorf("CheckpointRefAt = %+v %v", ref, err)
				}
				if _, err := tx.GetCheckpoint(th.ThreadID, 9); !errors.Is(err, ErrNotFound) {
					t.Errorf("a missing checkpoint: %v", err)
				}
				var seqs []uint64
				_ = tx.ForEachCheckpoint(th.ThreadID, func(seq uint64, _ *Checkpoint) error { seqs = append(seqs, seq); return nil })
				if !reflect.DeepEqual(seqs, []uint64{1, 2, 3}) {
					t.Errorf("ForEachCheckpoint = %v", seqs)
				}
				var back []any
				_ = tx.CheckpointsNewestFirst(th.ThreadID, func(cp *Checkpoint) (bool, error) {
					back = append(back, cp.Values["n"])
					return len(back) < 2, nil
				})
				if !reflect.DeepEqual(back, []any{float64(3), float64(2)}) {
					t.Errorf("CheckpointsNewestFirst, stopping at 2 = %v", back)
				}
				return nil
			})
			mustUpdate(t, s, func(tx Tx) error { return tx.DeleteCheckpointsBefore(th.ThreadID, 3) })
			count := func(id string) int {
				n := 0
				mustView(t, s, func(tx ReadTx) error {
					return tx.ForEachCheckpoint(id, func(uint64, *Checkpoint) error { n++; return nil })
				})
				return n
			}
			if n := count(th.ThreadID); n != 1 {
				t.Errorf("after DeleteCheckpointsBefore(3): %d checkpoints, want 1", n)
			}
			mustUpdate(t, s, func(tx Tx) error { return tx.DeleteThreadCheckpoints(th.ThreadID) })
			if n, m := count(th.ThreadID), count(other.ThreadID); n != 0 || m != 1 {
				t.Errorf("after DeleteThreadCheckpoints: %d left, another thread's %d (want 0, 1)", n, m)
			}
		}},
		{"an error in Update leaves nothing", func(t *testing.T, s Store) {
			th, r := newThreadRec(""), newRunRec("")
			boom := errors.New("boom")
			err := s.Update(ctx, func(tx Tx) error {
				if err := tx.PutThread(th); err != nil {
					return err
				}
				if err := tx.PutRun(r); err != nil {
					return err
				}
				return boom
			})
			if !errors.Is(err, boom) {
				t.Fatalf("Update = %v, want fn's error", err)
			}
			mustView(t, s, func(tx ReadTx) error {
				if tx.ThreadExists(th.ThreadID) {
					t.Error("the failed unit's thread was kept")
				}
				if _, err := tx.GetRun(r.RunID); !errors.Is(err, ErrNotFound) {
					t.Errorf("the failed unit's run was kept: %v", err)
				}
				return nil
			})
		}},
		{"a unit of work reads its own writes", func(t *testing.T, s Store) {
			th := newThreadRec("v1")
			mustUpdate(t, s, func(tx Tx) error {
				if err := tx.PutThread(th); err != nil {
					return err
				}
				got, err := tx.GetThread(th.ThreadID)
				if err != nil || got.Metadata["k"] != "v1" {
					t.Errorf("read after put in the same unit: %+v %v", got, err)
				}
				if err := tx.DeleteThreadRecord(th.ThreadID); err != nil {
					return err
				}
				if tx.ThreadExists(th.ThreadID) {
					t.Error("a thread deleted in the unit still exists in it")
				}
				return tx.PutThread(th)
			})
		}},
		{"UpdateThread: acknowledged writes are read, errNotHot and writes outside the thread keep nothing", func(t *testing.T, s Store) {
			th, r := newThreadRec("hot"), newRunRec("")
			r.ThreadID = th.ThreadID
			err := s.UpdateThread(ctx, th.ThreadID, false, func(tx Tx) error {
				if err := tx.PutRun(r); err != nil {
					return err
				}
				if err := tx.IndexRun(th.ThreadID, r.RunID); err != nil {
					return err
				}
				return tx.PutThread(th)
			})
			if err != nil {
				t.Fatal(err)
			}
			for name, view := range map[string]func(func(ReadTx) error) error{
				"ViewThread": func(fn func(ReadTx) error) error { return s.ViewThread(ctx, th.ThreadID, fn) },
				"View":       func(fn func(ReadTx) error) error { return s.View(ctx, fn) },
			} {
				err := view(func(tx ReadTx) error {
					got, err := tx.GetThread(th.ThreadID)
					if err != nil || got.Metadata["k"] != "hot" {
						t.Errorf("%s: the thread written by UpdateThread: %+v %v", name, got, err)
					}
					if ids, _ := tx.ThreadRunIDs(th.ThreadID); !reflect.DeepEqual(ids, []string{r.RunID}) {
						t.Errorf("%s: its run index: %v", name, ids)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			other := newThreadRec("")
			err = s.UpdateThread(ctx, other.ThreadID, false, func(tx Tx) error {
				if err := tx.PutThread(other); err != nil {
					return err
				}
				return errNotHot
			})
			if !errors.Is(err, errNotHot) {
				t.Fatalf("UpdateThread = %v, want errNotHot", err)
			}
			mustView(t, s, func(tx ReadTx) error {
				if tx.ThreadExists(other.ThreadID) {
					t.Error("a unit refused with errNotHot kept its write")
				}
				return nil
			})
			// A write outside the thread's own rows is refused in it.
			item := &Item{Namespace: []string{"n"}, Key: "k", Value: map[string]any{}}
			err = s.UpdateThread(ctx, other.ThreadID, false, func(tx Tx) error {
				if err := tx.PutThread(other); err != nil {
					return err
				}
				return tx.PutItem(item)
			})
			if !errors.Is(err, errNotHot) {
				t.Fatalf("UpdateThread writing an item = %v, want errNotHot", err)
			}
			mustView(t, s, func(tx ReadTx) error {
				if _, err := tx.GetItem(item.Namespace, item.Key); !errors.Is(err, ErrNotFound) || tx.ThreadExists(other.ThreadID) {
					t.Errorf("a unit that wrote outside its thread kept something: item %v, thread %v", err, tx.ThreadExists(other.ThreadID))
				}
				return nil
			})
		}},
		{"queue: claims in order, exclusive, leases expire, finished runs stay", func(t *testing.T, s Store) {
			th := newThreadRec("")
			r1, r2 := newRunRec(th.ThreadID), newRunRec(th.ThreadID)
			th.Queue = []string{r1.RunID, r2.RunID}
			th.Seq = 7
			mustUpdate(t, s, func(tx Tx) error {
				for _, r := range []*runRecord{r1, r2} {
					if err := tx.PutRun(r); err != nil {
						return err
					}
				}
				return tx.PutThread(th)
			})
			t0 := time.Now().UTC()
			claim := func(worker string, now time.Time) *runRecord {
				t.Helper()
				var got *runRecord
				mustUpdate(t, s, func(tx Tx) error {
					var err error
					got, err = tx.ClaimNextRun(th.ThreadID, runClaim{Worker: worker, Now: now, Lease: time.Minute})
					return err
				})
				return got
			}
			got := claim("w1", t0)
			if got == nil || got.RunID != r1.RunID || got.Status != RunRunning || got.FirstSeq != 7 || got.Lease == nil || got.Lease.Worker != "w1" {
				t.Fatalf("first claim = %+v, want r1 running under w1 from seq 7", got)
			}
			if again := claim("w2", t0.Add(time.Second)); again != nil {
				t.Fatalf("a second claim while w1's lease holds = %s, want none (claims are exclusive)", again.RunID)
			}
			mustUpdate(t, s, func(tx Tx) error {
				if err := tx.RenewLease(r1.RunID, "w2", t0.Add(time.Hour)); !errors.Is(err, ErrConflict) {
					t.Errorf("w2 renewing w1's lease: %v, want ErrConflict", err)
				}
				return tx.RenewLease(r1.RunID, "w1", t0.Add(2*time.Minute))
			})
			if early := claim("w2", t0.Add(90*time.Second)); early != nil {
				t.Fatalf("claimed inside the renewed lease: %s", early.RunID)
			}
			stolen := claim("w2", t0.Add(3*time.Minute))
			if stolen == nil || stolen.RunID != r1.RunID || stolen.Lease.Worker != "w2" {
				t.Fatalf("after w1's lease expired, w2 claimed %+v, want r1", stolen)
			}
			// The run ends (as the engine ends one): its thread is idle
			// and the finished run is not claimable again.
			mustUpdate(t, s, func(tx Tx) error {
				r, err := tx.GetRun(r1.RunID)
				if err != nil {
					return err
				}
				r.Status = RunSuccess
				if err := tx.PutRun(r); err != nil {
					return err
				}
				cur, err := tx.GetThread(th.ThreadID)
				if err != nil {
					return err
				}
				cur.Active = ""
				return tx.PutThread(cur)
			})
			next := claim("w3", t0.Add(time.Hour))
			if next == nil || next.RunID != r2.RunID {
				t.Fatalf("claim after r1 ended = %+v, want r2 (queue order)", next)
			}
			mustUpdate(t, s, func(tx Tx) error {
				r, _ := tx.GetRun(r1.RunID)
				if r.Status != RunSuccess {
					t.Errorf("the finished run was reclaimed: %s", r.Status)
				}
				return nil
			})
			if none := claim("w4", t0.Add(time.Hour)); none != nil {
				t.Fatalf("claim with r2 running and nothing queued = %s", none.RunID)
			}
		}},
		{"queue: a claim without a lease holds until the run ends", func(t *testing.T, s Store) {
			th := newThreadRec("")
			r := newRunRec(th.ThreadID)
			th.Queue = []string{r.RunID}
			mustUpdate(t, s, func(tx Tx) error {
				if err := tx.PutRun(r); err != nil {
					return err
				}
				return tx.PutThread(th)
			})
			for i, now := range []time.Time{time.Now().UTC(), time.Now().UTC().Add(24 * time.Hour)} {
				mustUpdate(t, s, func(tx Tx) error {
					got, err := tx.ClaimNextRun(th.ThreadID, runClaim{Now: now})
					if i == 0 && (err != nil || got == nil || got.Lease != nil) {
						t.Errorf("claim = %+v %v, want r without a lease", got, err)
					}
					if i == 1 && got != nil {
						t.Errorf("a claim without a lease was taken over a day later")
					}
					return err
				})
			}
		}},
		{"checkpoint rows are fenced to the thread's running run", func(t *testing.T, s Store) {
			th := newThreadRec("")
			th.Active = "run-a"
			mustUpdate(t, s, func(tx Tx) error { return tx.PutThread(th) })
			row := func(id string) []cpRow {
				return []cpRow{{rowPut, lgKey(th.ThreadID, "", lgKindCheckpoint, id), []byte(`{"run_id":"x"}`)}}
			}
			for _, c := range []struct {
				name, thread, run, id string
				open                  bool
				want                  error
			}{
				{"the running run", th.ThreadID, "run-a", "1", false, nil},
				{"the running run, fence open", th.ThreadID, "run-a", "2", true, nil},
				{"another run", th.ThreadID, "run-b", "3", false, ErrFenced},
				{"another run, fence open for the running one", th.ThreadID, "run-b", "4", true, ErrFenced},
				{"outside any run while one runs", th.ThreadID, "", "5", false, ErrFenced},
				{"a run of a thread that does not exist", storage.NewID().String(), "run-a", "6", false, ErrFenced},
			} {
				if c.open {
					s.OpenFence(c.thread, c.run)
					if c.run == "run-b" {
						s.OpenFence(c.thread, "run-a")
					}
				}
				err := s.PutCheckpointRows(ctx, c.thread, c.run, row(c.id))
				s.CloseFence(c.thread)
				if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
					t.Errorf("%s: %v, want %v", c.name, err, c.want)
				}
			}
			var ids []string
			if err := s.ViewCheckpointRows(ctx, th.ThreadID, func(lg checkpointRows) error {
				lg.scan(lgKey(th.ThreadID, "", lgKindCheckpoint, ""), func(k, _ []byte) bool {
					ids = append(ids, string(k[len(lgKey(th.ThreadID, "", lgKindCheckpoint, "")):]))
					return true
				})
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ids, []string{"1", "2"}) {
				t.Errorf("rows kept = %v, want only the running run's (1, 2)", ids)
			}
			idle := newThreadRec("")
			mustUpdate(t, s, func(tx Tx) error { return tx.PutThread(idle) })
			if err := s.PutCheckpointRows(ctx, idle.ThreadID, "", row("7")); err != nil {
				t.Errorf("a write outside runs on an idle thread: %v", err)
			}
		}},
		{"checkpoint rows in a unit of work", func(t *testing.T, s Store) {
			a, b := lgKey("t1", "", lgKindCheckpoint, "1"), lgKey("t1", "", lgKindCheckpoint, "2")
			other := lgKey("t2", "", lgKindCheckpoint, "1")
			mustUpdate(t, s, func(tx Tx) error {
				for _, k := range [][]byte{b, a, other} {
					if err := tx.PutCheckpointRow(k, []byte("v"+string(k[len(k)-1:]))); err != nil {
						return err
					}
				}
				return nil
			})
			scan := func() (keys []string) {
				mustUpdate(t, s, func(tx Tx) error {
					return tx.ScanCheckpointRows(lgKey("t1", ""), func(k, _ []byte) bool { keys = append(keys, string(k)); return true })
				})
				return keys
			}
			if got := scan(); !reflect.DeepEqual(got, []string{string(a), string(b)}) {
				t.Errorf("scan of t1 = %q, want its rows in key order", got)
			}
			mustUpdate(t, s, func(tx Tx) error { return tx.DeleteCheckpointRow(a) })
			if got := scan(); !reflect.DeepEqual(got, []string{string(b)}) {
				t.Errorf("after delete = %q", got)
			}
			_ = s.ViewCheckpointRows(ctx, "", func(lg checkpointRows) error {
				if v := lg.get(other); string(v) != "v1" {
					t.Errorf("get = %q", v)
				}
				if k, _ := lg.last(lgKey("t1", "")); string(k) != string(b) {
					t.Errorf("last = %q", k)
				}
				return nil
			})
		}},
		{"notifications fire after the commit, never for a failed unit", func(t *testing.T, s Store) {
			var mu sync.Mutex
			var got []storeEvent
			stop := s.Subscribe(func(ev storeEvent) { mu.Lock(); got = append(got, ev); mu.Unlock() })
			th, r := newThreadRec(""), newRunRec("")
			r.ThreadID = th.ThreadID
			_ = s.Update(ctx, func(tx Tx) error {
				_ = tx.PutRun(r)
				_ = tx.IndexRun(th.ThreadID, r.RunID)
				return errors.New("abandoned")
			})
			mustUpdate(t, s, func(tx Tx) error {
				if err := tx.PutThread(th); err != nil {
					return err
				}
				if err := tx.PutRun(r); err != nil {
					return err
				}
				return tx.IndexRun(th.ThreadID, r.RunID)
			})
			err := s.UpdateThread(ctx, th.ThreadID, false, func(tx Tx) error {
				r.Status = RunRunning
				return tx.PutRun(r)
			})
			if err != nil {
				t.Fatal(err)
			}
			stop()
			mustUpdate(t, s, func(tx Tx) error { return tx.DeleteRun(th.ThreadID, r.RunID) })
			want := []storeEvent{
				{Kind: eventRunChanged, Thread: th.ThreadID, Run: r.RunID, Status: RunPending},
				{Kind: eventRunQueued, Thread: th.ThreadID, Run: r.RunID},
				{Kind: eventRunChanged, Thread: th.ThreadID, Run: r.RunID, Status: RunRunning},
			}
			mu.Lock()
			defer mu.Unlock()
			if !reflect.DeepEqual(got, want) {
				t.Errorf("events = %+v\nwant %+v", got, want)
			}
		}},
		{"assistants and their versions", func(t *testing.T, s Store) {
			a1 := &Assistant{AssistantID: "a1", GraphID: "g", Name: "one", Version: 1, Metadata: map[string]any{}}
			a2 := &Assistant{AssistantID: "a2", GraphID: "g", Name: "two", Version: 1, Metadata: map[string]any{}}
			mustUpdate(t, s, func(tx Tx) error {
				for _, a := range []*Assistant{a1, a2} {
					if err := tx.PutAssistant(a); err != nil {
						return err
					}
					if err := tx.PutAssistantVersion(a); err != nil {
						return err
					}
				}
				v2 := *a1
				v2.Version, v2.Name = 2, "one again"
				if err := tx.PutAssistant(&v2); err != nil {
					return err
				}
				return tx.PutAssistantVersion(&v2)
			})
			mustView(t, s, func(tx ReadTx) error {
				if a, err := tx.GetAssistant("a1"); err != nil || a.Version != 2 || a.Name != "one again" {
					t.Errorf("GetAssistant = %+v %v", a, err)
				}
				vs, err := tx.AssistantVersions("a1")
				if err != nil || len(vs) != 2 || vs[0].Version != 2 || vs[1].Version != 1 {
					t.Errorf("AssistantVersions = %+v %v, want 2 then 1", vs, err)
				}
				if v, err := tx.GetAssistantVersion("a1", 1); err != nil || v.Name != "one" {
					t.Errorf("GetAssistantVersion(1) = %+v %v", v, err)
				}
				if _, err := tx.GetAssistantVersion("a1", 9); !errors.Is(err, ErrNotFound) {
					t.Errorf("a missing version: %v", err)
				}
				var ids []string
				_ = tx.ForEachAssistant(func(a *Assistant) error { ids = append(ids, a.AssistantID); return nil })
				if !reflect.DeepEqual(ids, []string{"a1", "a2"}) {
					t.Errorf("ForEachAssistant = %v", ids)
				}
				return nil
			})
			mustUpdate(t, s, func(tx Tx) error { return tx.DeleteAssistant("a1") })
			mustView(t, s, func(tx ReadTx) error {
				if _, err := tx.GetAssistant("a1"); !errors.Is(err, ErrNotFound) {
					t.Errorf("a deleted assistant: %v", err)
				}
				if vs, _ := tx.AssistantVersions("a1"); len(vs) != 0 {
					t.Errorf("a deleted assistant's versions: %d", len(vs))
				}
				if vs, _ := tx.AssistantVersions("a2"); len(vs) != 1 {
					t.Errorf("another assistant's versions: %d, want 1", len(vs))
				}
				return nil
			})
		}},
		{"store items by namespace", func(t *testing.T, s Store) {
			items := []*Item{
				{Namespace: []string{"a", "b"}, Key: "k1", Value: map[string]any{"n": 1.0}},
				{Namespace: []string{"a"}, Key: "k2", Value: map[string]any{"n": 2.0}},
				{Namespace: []string{"ab"}, Key: "k3", Value: map[string]any{"n": 3.0}},
			}
			mustUpdate(t, s, func(tx Tx) error {
				for _, it := range items {
					if err := tx.PutItem(it); err != nil {
						return err
					}
				}
				return nil
			})
			mustView(t, s, func(tx ReadTx) error {
				if it, err := tx.GetItem([]string{"a", "b"}, "k1"); err != nil || it.Value["n"] != 1.0 {
					t.Errorf("GetItem = %+v %v", it, err)
				}
				if _, err := tx.GetItem([]string{"a"}, "k1"); !errors.Is(err, ErrNotFound) {
					t.Errorf("an item under another namespace: %v", err)
				}
				var keys []string
				_ = tx.ScanItems([]string{"a"}, func(it *Item) (bool, error) { keys = append(keys, it.Key); return true, nil })
				if !reflect.DeepEqual(keys, []string{"k2", "k1"}) {
					t.Errorf(`ScanItems(["a"]) = %v, want k2, k1 (not "ab"'s k3)`, keys)
				}
				var nss [][]string
				_ = tx.ForEachItemNamespace(func(ns []string) error { nss = append(nss, ns); return nil })
				if len(nss) != 3 {
					t.Errorf("ForEachItemNamespace = %v", nss)
				}
				return nil
			})
			mustUpdate(t, s, func(tx Tx) error { return tx.DeleteItem([]string{"a"}, "k2") })
			mustView(t, s, func(tx ReadTx) error {
				if _, err := tx.GetItem([]string{"a"}, "k2"); !errors.Is(err, ErrNotFound) {
					t.Errorf("a deleted item: %v", err)
				}
				return nil
			})
		}},
		{"crons", func(t *testing.T, s Store) {
			c1, c2 := &Cron{CronID: "c1", Schedule: "* * * * *"}, &Cron{CronID: "c2", Schedule: "0 * * * *"}
			mustUpdate(t, s, func(tx Tx) error {
				if err := tx.PutCron(c1); err != nil {
					return err
				}
				return tx.PutCron(c2)
			})
			mustUpdate(t, s, func(tx Tx) error {
				if c, err := tx.GetCron("c2"); err != nil || c.Schedule != "0 * * * *" {
					t.Errorf("GetCron = %+v %v", c, err)
				}
				var ids []string
				_ = tx.ForEachCron(func(c *Cron, err error) error { ids = append(ids, c.CronID); return err })
				if !reflect.DeepEqual(ids, []string{"c1", "c2"}) {
					t.Errorf("ForEachCron = %v", ids)
				}
				return tx.DeleteCron("c1")
			})
			mustView(t, s, func(tx ReadTx) error {
				if _, err := tx.GetCron("c1"); !errors.Is(err, ErrNotFound) {
					t.Errorf("a deleted cron: %v", err)
				}
				return nil
			})
		}},
		{"TTL index", func(t *testing.T, s Store) {
			now := time.Now().UTC()
			th1, th2, th3 := storage.NewID().String(), storage.NewID().String(), storage.NewID().String()
			e1, e2, e3 := ttlEntryOf(now.Add(-time.Hour), th1), ttlEntryOf(now.Add(-time.Minute), th2), ttlEntryOf(now.Add(time.Hour), th3)
			mustUpdate(t, s, func(tx Tx) error {
				for _, e := range []ttlEntry{e3, e2, e1} {
					if err := tx.PutTTLEntry(e); err != nil {
						return err
					}
				}
				return nil
			})
			mustView(t, s, func(tx ReadTx) error {
				due, err := tx.DueTTLEntries(now, 10)
				if err != nil || !reflect.DeepEqual(due, []ttlEntry{e1, e2}) {
					t.Errorf("DueTTLEntries = %v %v, want the two past entries, earliest first", due, err)
				}
				if due, _ := tx.DueTTLEntries(now, 1); !reflect.DeepEqual(due, []ttlEntry{e1}) {
					t.Errorf("DueTTLEntries limited to 1 = %v", due)
				}
				if !tx.HasTTLEntry(e3) || tx.HasTTLEntry(ttlEntryOf(now, th3)) {
					t.Error("HasTTLEntry disagrees with what was put")
				}
				return nil
			})
			// A thread's deletion deletes its entry.
			rec := newThreadRec("")
			rec.ThreadID = th1
			rec.TTL = &ttlPolicy{Strategy: TTLDelete, Minutes: 1, Indexed: now.Add(-time.Hour)}
			mustUpdate(t, s, func(tx Tx) error { return tx.PutThread(rec) })
			mustUpdate(t, s, func(tx Tx) error { return tx.DeleteThreadRecord(th1) })
			mustUpdate(t, s, func(tx Tx) error { return tx.DeleteTTLEntry(e2) })
			mustView(t, s, func(tx ReadTx) error {
				if due, _ := tx.DueTTLEntries(now, 10); len(due) != 0 {
					t.Errorf("entries left after the thread's deletion and DeleteTTLEntry: %v", due)
				}
				return nil
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, open(t)) })
	}
}

func TestBoltStoreConformance(t *testing.T) {
	runStoreConformance(t, func(t *testing.T) Store {
		db, err := storage.Open(filepath.Join(t.TempDir(), "agent.db"), time.Second, Migrations)
		if err != nil {
			t.Fatal(err)
		}
		s, err := openBoltStore(db, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); s.run(ctx, 10*time.Millisecond, func(err error) { t.Error(err) }) }()
		t.Cleanup(func() {
			cancel()
			<-done
			_ = s.pend.j.Close()
			_ = db.Close()
		})
		return s
	})
}

func newThreadRec(meta string) *threadRecord {
	now := time.Now().UTC()
	return &threadRecord{Thread: Thread{ThreadID: storage.NewID().String(), CreatedAt: now, UpdatedAt: now,
		Status: ThreadIdle, Metadata: map[string]any{"k": meta}, Values: map[string]any{}}}
}

func newRunRec(thread string) *runRecord {
	if thread == "" {
		thread = storage.NewID().String()
	}
	now := time.Now().UTC()
	return &runRecord{Run: Run{RunID: storage.NewID().String(), ThreadID: thread, CreatedAt: now, UpdatedAt: now,
		Status: RunPending, Metadata: map[string]any{}}}
}

func mustUpdate(t *testing.T, s Store, fn func(Tx) error) {
	t.Helper()
	if err := s.Update(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}

func mustView(t *testing.T, s Store, fn func(ReadTx) error) {
	t.Helper()
	if err := s.View(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}
