package agent

import (
	"errors"
	"fmt"
	"time"
)

// runClaim is a worker's claim of a thread's next run.
type runClaim struct {
	// Worker names the claiming worker (a replica, a process).
	Worker string
	// Now is the claim's time: the run's updated_at, and what leases
	// are compared with.
	Now time.Time
	// Lease is how long the claim holds without a renewal; 0 holds
	// until the run ends (one process: a restart's recovery ends what
	// was running, Engine.recover).
	Lease time.Duration
	// SkipLocked, for one worker among several, skips a thread another
	// unit of work holds (PostgreSQL: FOR UPDATE SKIP LOCKED) instead of
	// waiting for it: the claim returns nil, and the other claimer, or
	// the wake-up of the admission holding the row, has the thread.
	SkipLocked bool
}

// runLease is the claim a running run is held under, when it expires.
type runLease struct {
	Worker string    `json:"worker"`
	Until  time.Time `json:"until"`
}

// queueWrites are a unit of work's claims on a thread's run queue (the
// thread record's Active and Queue).
type queueWrites interface {
	// ClaimNextRun makes the oldest queued run of thread its running run
	// (status running, FirstSeq the thread's checkpoint sequence) for
	// c.Worker and returns it; nil when there is none to claim: the
	// thread is missing, has no queued run, or its running run's claim
	// still holds. A running run whose lease has expired is claimable
	// again: it is returned to the new worker under a new lease, still
	// running (the caller decides whether it resumes or ends it). A run
	// in the queue whose record is missing is dropped from it. Claims
	// are exclusive: two units of work claiming on the same thread are
	// serialized, and the second sees the first's run.
	ClaimNextRun(thread string, c runClaim) (*runRecord, error)
	// RenewLease extends the lease worker holds on run to until;
	// ErrConflict when the run is no longer running under worker's claim.
	RenewLease(run, worker string, until time.Time) error
}

func (t *boltTx) ClaimNextRun(thread string, c runClaim) (*runRecord, error) {
	th, err := t.GetThread(thread)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return claimNext(t, th, c)
}

func (t *boltTx) RenewLease(run, worker string, until time.Time) error {
	return renewLease(t, run, worker, until)
}

// claimNext is ClaimNextRun on a store's Tx once it holds th (and, where
// the store needs it, a lock on its row): the running run again when its
// lease expired, else the head of the queue, which becomes the running
// run. A queued run that is gone is dropped from the queue.
func claimNext(tx Tx, th *threadRecord, c runClaim) (*runRecord, error) {
	lease := func(r *runRecord) {
		r.Lease = nil
		if c.Lease > 0 {
			r.Lease = &runLease{Worker: c.Worker, Until: c.Now.Add(c.Lease)}
		}
	}
	if th.Active != "" {
		r, err := tx.GetRun(th.Active)
		if errors.Is(err, ErrNotFound) {
			return nil, nil
		}
		if err != nil || r.Lease == nil || r.Lease.Until.After(c.Now) {
			return nil, err
		}
		lease(r)
		r.UpdatedAt = c.Now
		return r, tx.PutRun(r)
	}
	if len(th.Queue) == 0 {
		return nil, nil
	}
	id := th.Queue[0]
	th.Queue = th.Queue[1:]
	r, err := tx.GetRun(id)
	if errors.Is(err, ErrNotFound) {
		return nil, tx.PutThread(th)
	}
	if err != nil {
		return nil, err
	}
	r.Status, r.UpdatedAt = RunRunning, c.Now
	r.FirstSeq = th.Seq
	lease(r)
	th.Active = id
	if err := tx.PutRun(r); err != nil {
		return nil, err
	}
	return r, tx.PutThread(th)
}

// renewLease is RenewLease on a store's Tx.
func renewLease(tx Tx, run, worker string, until time.Time) error {
	r, err := tx.GetRun(run)
	if err != nil {
		return fmt.Errorf("renew the lease of run %s: %w", run, err)
	}
	if r.Status != RunRunning || r.Lease == nil || r.Lease.Worker != worker {
		return fmt.Errorf("%w: run %s is not running under %s's claim", ErrConflict, run, worker)
	}
	r.Lease.Until = until
	return tx.PutRun(r)
}
