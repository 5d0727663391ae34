package agent

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"slipway/storage"
)

// TestPGCheckpointWriteOrderedByRowLocks: PutCheckpointRows runs under
// READ COMMITTED with row locks, not SERIALIZABLE, and still orders
// itself against what its fence depends on. A takeover of the run that
// is committing makes the write wait for it and then refuses it; a unit
// that read the thread before the write committed and deletes it after
// runs again and deletes the write's rows too (no rows are left behind
// for a thread that is gone).
func TestPGCheckpointWriteOrderedByRowLocks(t *testing.T) {
	ctx := context.Background()
	row := func(thread, id string) []cpRow {
		return []cpRow{{mode: rowPut, key: lgKey(thread, "", lgKindCheckpoint, id), val: []byte(`{"run_id":"x"}`)}}
	}
	t.Run("a takeover committing: the write waits for it, then is fenced", func(t *testing.T) {
		s := openPGTestStore(t)
		now := time.Now().UTC()
		thread, run := putLeasedRun(t, s, now.Add(time.Minute))
		reached, release, done, _ := holdUnit(s, func(tx Tx) error {
			r, err := tx.GetRun(run)
			if err != nil {
				return err
			}
			r.Attempt, r.Lease = 2, &runLease{Worker: "worker-b", Until: now.Add(time.Minute)}
			return tx.PutRun(r)
		}, func(Tx) error { return nil })
		<-reached
		put := make(chan error, 1)
		claim := context.WithValue(ctx, claimKey{}, attemptClaim{Worker: "worker-a", Attempt: 1})
		go func() { put <- s.PutCheckpointRows(claim, thread, run, row(thread, "1")) }()
		select {
		case err := <-put:
			t.Fatalf("the write returned (%v) while the takeover was committing", err)
		case <-time.After(300 * time.Millisecond):
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := <-put; !errors.Is(err, ErrFenced) {
			t.Fatalf("the write of the attempt taken over: %v, want fenced", err)
		}
	})

	t.Run("a deletion that read the thread first deletes the write's rows too", func(t *testing.T) {
		s := openPGTestStore(t)
		th := newThreadRec("")
		mustUpdate(t, s, func(tx Tx) error { return tx.PutThread(th) })
		reached, release, done, attempts := holdUnit(s, func(tx Tx) error {
			_, err := tx.GetThread(th.ThreadID)
			return err
		}, func(tx Tx) error { return deleteThreadData(tx, th.ThreadID) }) // as DeleteThread does
		<-reached
		if err := s.PutCheckpointRows(ctx, th.ThreadID, "", row(th.ThreadID, "1")); err != nil {
			t.Fatal(err)
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		left := 0
		if err := s.ViewCheckpointRows(ctx, th.ThreadID, func(lg checkpointRows) error {
			lg.scan(lgKey(th.ThreadID, "", lgKindCheckpoint, ""), func(_, _ []byte) bool { left++; return true })
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if left != 0 || *attempts < 2 {
			t.Fatalf("after the deletion: %d checkpoint rows left, %d attempts (want none left, the deletion run again)", left, *attempts)
		}
	})
}

// holdUnit runs first and then then in an Update whose first attempt
// stops between them until release is closed; reached is closed there.
func holdUnit(s Store, first, then func(Tx) error) (reached, release chan struct{}, done chan error, attempts *int) {
	reached, release, done = make(chan struct{}), make(chan struct{}), make(chan error, 1)
	attempts = new(int)
	var once sync.Once
	go func() {
		done <- s.Update(context.Background(), func(tx Tx) error {
			*attempts++
			if err := first(tx); err != nil {
				return err
			}
			once.Do(func() { close(reached); <-release })
			return then(tx)
		})
	}()
	return reached, release, done, attempts
}

// TestPGClaimOrderedByRowLocks: a worker's claim runs under READ
// COMMITTED with row locks (updateLocked). A takeover of a run whose
// expired lease is being renewed at that moment waits for the renewal,
// sees it, and takes nothing: the run stays its worker's.
func TestPGClaimOrderedByRowLocks(t *testing.T) {
	s := openPGTestStore(t)
	thread, run := putLeasedRun(t, s, time.Now().UTC().Add(-time.Second))
	// The renewal has written the run's row and not committed yet when
	// the claim comes.
	reached, release, done, _ := holdUnit(s, func(tx Tx) error {
		return tx.RenewLease(run, "worker-a", time.Now().UTC().Add(time.Minute))
	}, func(Tx) error { return nil })
	<-reached
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	e := &Engine{store: s, WorkerID: "worker-b", Lease: time.Minute, ctx: ctx, Log: zerolog.Nop()}
	type result struct {
		r   *runRecord
		err error
	}
	claimed := make(chan result, 1)
	go func() {
		r, err := e.claimLeased(thread)
		claimed <- result{r, err}
	}()
	select {
	case got := <-claimed:
		t.Fatalf("the claim returned (%+v, %v) while the renewal held the run's row", got.r, got.err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := <-claimed
	if got.err != nil || got.r != nil {
		t.Fatalf("the takeover of a run renewed meanwhile: %+v, %v; want nothing claimed", got.r, got.err)
	}
	mustView(t, s, func(tx ReadTx) error {
		r, err := tx.GetRun(run)
		if err != nil || r.Lease == nil || r.Lease.Worker != "worker-a" || r.Attempt != 1 {
			t.Errorf("the run after the claim: %+v %v, want worker-a's attempt 1", r, err)
		}
		return nil
	})
}

// putLeasedRun stores a busy thread whose running run is worker-a's first
// attempt under a lease until until, and returns their ids.
func putLeasedRun(t *testing.T, s *pgStore, until time.Time) (thread, run string) {
	t.Helper()
	thread, run = storage.NewID().String(), storage.NewID().String()
	now := time.Now().UTC()
	mustUpdate(t, s, func(tx Tx) error {
		if err := tx.PutThread(&threadRecord{Thread: Thread{ThreadID: thread, CreatedAt: now, UpdatedAt: now, Status: ThreadBusy,
			Metadata: map[string]any{}, Values: map[string]any{}}, Active: run}); err != nil {
			return err
		}
		if err := tx.PutRun(&runRecord{Run: Run{RunID: run, ThreadID: thread, Status: RunRunning, CreatedAt: now, UpdatedAt: now},
			Attempt: 1, Lease: &runLease{Worker: "worker-a", Until: until}}); err != nil {
			return err
		}
		return tx.IndexRun(thread, run)
	})
	return thread, run
}
