package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// cancelledStatus is how a run ends given how it reported its end: a run
// whose cancel was recorded (Cancel) ends as that cancel said — even one
// that completed before it saw the cancel, since the client was already
// told it was interrupted. cur is the run's record (nil: gone).
func cancelledStatus(cur *runRecord, reported string) string {
	if cur == nil || cur.CancelAction == "" {
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
func recoverCancelled(tx Tx, r *runRecord, now time.Time) (bool, error) {
	switch r.CancelAction {
	case "":
		return false, nil
	case StrategyRollback:
		if err := deleteLG(tx, r.ThreadID, r.RunID); err != nil {
			return true, err
		}
		return true, tx.DeleteRun(r.ThreadID, r.RunID)
	}
	r.Status, r.UpdatedAt = RunInterrupted, now
	return true, tx.PutRun(r)
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
func (e *Engine) CancelMany(ctx context.Context, threadID string, runIDs []string, status, action, reason string) error {
	type target struct{ thread, run string }
	var targets []target
	err := e.store.ViewThread(context.Background(), threadID, func(tx ReadTx) error {
		if status == "" {
			for _, id := range runIDs {
				r, err := tx.GetRun(id)
				if err != nil || r.ThreadID != threadID {
					return fmt.Errorf("%w: run %s", ErrNotFound, id)
				}
				targets = append(targets, target{threadID, id})
			}
			return nil
		}
		return tx.ForEachBusyThread(func(t *threadRecord) error {
			if t.Active != "" && (status == CancelRunning || status == CancelAll) {
				if r, err := tx.GetRun(t.Active); err == nil && r.CancelAction == "" {
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
		switch err := e.Cancel(ctx, tg.thread, tg.run, action, reason, false); {
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

// dropPending ends a run that never started, in tx: a rollback deletes
// it, an interrupt records it interrupted. The caller takes it off its
// thread's queue.
func dropPending(tx Tx, threadID, runID, action string, now time.Time) error {
	r, err := tx.GetRun(runID)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if action == StrategyRollback {
		return tx.DeleteRun(threadID, runID)
	}
	r.Status, r.UpdatedAt = RunInterrupted, now
	return tx.PutRun(r)
}

// endPending ends, once dropPending's commit is done, the event log of a
// run that never started: its joins and streams return.
func (e *Engine) endPending(runID string) {
	e.Metrics.pendingCancelled()
	if e.distributed() {
		// Readers on every replica see the stream end.
		ectx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := e.Bus.End(ectx, runID, 0); err != nil {
			e.Log.Warn().Err(err).Str("run_id", runID).Msg("end a cancelled run's stream")
		}
		return
	}
	if lr := e.liveRun(runID); lr != nil {
		lr.events.close()
	}
}

// cancelLive stops a running run (or marks a pending one to stop when it starts).
func (e *Engine) cancelLive(runID, action string, cause error) {
	if e.distributed() {
		// The run is some worker's (maybe this process's).
		e.onBusCancel(runID, action)
		e.busCancel(runID, action)
		return
	}
	e.mu.Lock()
	lr := e.live[runID]
	if lr == nil {
		lr = &liveRun{events: newEventLog(), done: make(chan struct{})}
		e.live[runID] = lr
	}
	lr.action = action
	cancel := lr.cancel
	e.mu.Unlock()
	if cancel != nil {
		cancel(cause)
	}
}

// Cancel stops a run: a running one is interrupted (its progress kept) or
// rolled back (deleted with what it wrote); a pending one never starts.
// reason is what the thread's error says of the cancel (Thread.Error).
func (e *Engine) Cancel(ctx context.Context, threadID, runID, action, reason string, wait bool) error {
	if action == "" {
		action = StrategyInterrupt
	}
	running := false
	err := e.store.Update(context.Background(), func(tx Tx) error {
		running = false
		r, err := tx.GetRun(runID)
		if err != nil || r.ThreadID != threadID {
			return fmt.Errorf("%w: run %s", ErrNotFound, runID)
		}
		t, err := tx.GetThread(threadID)
		if err != nil {
			return fmt.Errorf("%w: thread %s", ErrNotFound, threadID)
		}
		switch {
		case r.Status == RunRunning, r.CancelAction != "" && t.Active == runID:
			// Recorded interrupted now, though it takes the run a moment to
			// unwind: a client that reads it right after the cancel sees it
			// ended, as on the reference servers. A second cancel may turn an
			// interrupt into a rollback. finish keeps this outcome.
			running = true
			if r.CancelAction != StrategyRollback {
				r.CancelAction, r.CancelReason = action, reason
			}
			r.Status, r.UpdatedAt = RunInterrupted, time.Now().UTC()
			return tx.PutRun(r)
		case r.Status == RunPending:
			q := t.Queue[:0]
			for _, id := range t.Queue {
				if id != runID {
					q = append(q, id)
				}
			}
			t.Queue = q
			if !t.busy() {
				t.Status = ThreadIdle
			}
			if err := dropPending(tx, threadID, runID, action, time.Now().UTC()); err != nil {
				return err
			}
			return tx.PutThread(t)
		}
		return fmt.Errorf("%w: run %s has already ended (%s)", ErrConflict, runID, r.Status)
	})
	if err != nil {
		return err
	}
	if !running {
		e.endPending(runID)
		return nil
	}
	cause := causeCancel
	if action == StrategyRollback {
		// A rollback after an interrupt: the first cancel's context cause
		// stays, finish reads the action from the record.
		cause = causeRollback
	}
	e.cancelLive(runID, action, cause)
	if wait && e.distributed() {
		return e.waitRemote(ctx, runID)
	}
	if wait {
		if lr := e.liveRun(runID); lr != nil {
			select {
			case <-lr.done:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}
