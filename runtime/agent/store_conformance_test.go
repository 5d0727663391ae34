package agent

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"slipway/storage"
)

// storeCase is one check of the Store contract on an empty store.
type storeCase struct {
	name string
	run  func(t *testing.T, s Store)
}

// runStoreConformance checks the Store contract (store.go) on the stores
// open makes, each empty: any implementation runs it from its own test.
// The cases: units of work and the thread-scoped resources here, the
// queue, fencing and events in store_conformance_queue_test.go, the other
// resources in store_conformance_resources_test.go.
func runStoreConformance(t *testing.T, open func(t *testing.T) Store) {
	cases := append(append(coreStoreCases(), queueStoreCases()...), resourceStoreCases()...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, open(t)) })
	}
}

func coreStoreCases() []storeCase {
	ctx := context.Background()
	return []storeCase{
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
	}
}

func TestBoltStoreConformance(t *testing.T) {
	runStoreConformance(t, func(t *testing.T) Store {
		s, _ := openIndexStore(t)
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
