package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// cancelledStatus is how a run ends given how it reported its end: a run
// whose cancel was recorded (Cancel) ends as that cancel said — even one
// that completed before it saw the cancel, since the client was already
// told it was interrupted.
func cancelledStatus(tx *bolt.Tx, runID, reported string) string {
	cur, err := getRun(tx, runID)
	if err != nil || cur.CancelAction == "" {
		return reported
	}
	if cur.CancelAction == StrategyRollback {
		return "rollback"
	}
	if reported == "rollback" {
		return reported // a newer run's rollback strategy
	}
	return RunInterrupted
}

// recoverCancelled ends a run that a crash left active after its cancel
// was recorded: as the cancel said (interrupted, or rolled back with what
// it wrote). It reports false for a run with no recorded cancel.
func recoverCancelled(tx *bolt.Tx, r *runRecord, now time.Time) (bool, error) {
	switch r.CancelAction {
	case "":
		return false, nil
	case StrategyRollback:
		if err := deleteLG(tx, r.ThreadID, r.RunID); err != nil {
			return true, err
		}
		if err := tx.Bucket([]byte(bThreadRuns)).Delete(idxKey(r.ThreadID, r.RunID)); err != nil {
			return true, err
		}
		return true, tx.Bucket([]byte(bRuns)).Delete([]byte(r.RunID))
	}
	r.Status, r.UpdatedAt = RunInterrupted, now
	return true, putJSON(tx.Bucket([]byte(bRuns)), r.RunID, r)
}

// Cancel statuses of CancelMany.
const (
	CancelPending = "pending"
	CancelRunning = "running"
	CancelAll     = "all"
)

// CancelMany cancels runs as POST /runs/cancel does on the reference
// servers: the runs runIDs of thread threadID, or (status) every pending,
// running or both run of the deployment. Each run is cancelled as Cancel
// does (a running one is recorded interrupted before this returns). It is
// ErrNotFound when no run could be cancelled, or when one of runIDs is not
// a run of threadID.
func (e *Engine) CancelMany(ctx context.Context, threadID string, runIDs []string, status, action string) error {
	type target struct{ thread, run string }
	var targets []target
	err := e.view(threadID, func(tx *bolt.Tx) error {
		if status == "" {
			for _, id := range runIDs {
				r, err := getRun(tx, id)
				if err != nil || r.ThreadID != threadID {
					return fmt.Errorf("%w: run %s", ErrNotFound, id)
				}
				targets = append(targets, target{threadID, id})
			}
			return nil
		}
		return tx.Bucket([]byte(bThreads)).ForEach(func(k, v []byte) error {
			var t threadRecord
			if err := unmarshalStored(v, &t); err != nil {
				return err
			}
			if t.Active != "" && (status == CancelRunning || status == CancelAll) {
				if r, err := getRun(tx, t.Active); err == nil && r.CancelAction == "" {
					targets = append(targets, target{t.ThreadID, t.Active})
				}
			}
			if status == CancelPending || status == CancelAll {
				for _, id := range slices.Clone(t.Queue) {
					targets = append(targets, target{t.ThreadID, id})
				}
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	cancelled := 0
	for _, tg := range targets {
		switch err := e.Cancel(ctx, tg.thread, tg.run, action, false); {
		case err == nil:
			cancelled++
		case errors.Is(err, ErrConflict), errors.Is(err, ErrNotFound) && status != "":
			// Ended (or gone) since it was selected.
		default:
			return err
		}
	}
	if cancelled == 0 {
		return fmt.Errorf("%w: no runs found to cancel", ErrNotFound)
	}
	return nil
}
