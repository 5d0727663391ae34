package agent

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"slipway/storage"
)

// queueStoreCases check claims, fencing and events (runStoreConformance).
func queueStoreCases() []storeCase {
	ctx := context.Background()
	return []storeCase{
		{"busy threads: their queued and running runs counted", func(t *testing.T, s Store) {
			idle, running, queued := newThreadRec(""), newThreadRec(""), newThreadRec("")
			idle.Active, idle.Queue = "", nil
			running.Active, running.Queue = storage.NewID().String(), []string{storage.NewID().String()}
			queued.Active, queued.Queue = "", []string{storage.NewID().String(), storage.NewID().String()}
			mustUpdate(t, s, func(tx Tx) error {
				for _, th := range []*threadRecord{idle, running, queued} {
					if err := tx.PutThread(th); err != nil {
						return err
					}
				}
				return nil
			})
			mustView(t, s, func(tx ReadTx) error {
				p, r, err := tx.CountBusy()
				if err != nil || p != 3 || r != 1 {
					t.Errorf("CountBusy = %d pending, %d running, %v; want 3, 1", p, r, err)
				}
				return nil
			})
		}},
		{"runs: a thread's runs newest first, read only as far as asked", func(t *testing.T, s Store) {
			th := newThreadRec("")
			other := newThreadRec("")
			var ids []string
			mustUpdate(t, s, func(tx Tx) error {
				for i := 0; i < 5; i++ {
					for _, owner := range []*threadRecord{th, other} {
						r := newRunRec(owner.ThreadID)
						if err := tx.PutRun(r); err != nil {
							return err
						}
						if err := tx.IndexRun(owner.ThreadID, r.RunID); err != nil {
							return err
						}
						if owner == th {
							ids = append([]string{r.RunID}, ids...)
						}
					}
				}
				return errors.Join(tx.PutThread(th), tx.PutThread(other))
			})
			_ = s.View(ctx, func(tx ReadTx) error {
				var got []string
				if err := tx.EachThreadRunNewest(th.ThreadID, func(r *runRecord) bool {
					got = append(got, r.RunID)
					return len(got) < 3
				}); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, ids[:3]) {
					t.Errorf("EachThreadRunNewest stopped at %v, want the 3 newest %v", got, ids[:3])
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
	}
}
