package agent

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// GetRun returns a run of a thread.
func (e *Engine) GetRun(threadID, runID string) (Run, error) {
	var out Run
	err := e.store.ViewThread(context.Background(), threadID, func(tx ReadTx) error {
		if !tx.ThreadExists(threadID) {
			return fmt.Errorf("%w: thread %s", ErrNotFound, threadID)
		}
		r, err := tx.GetRun(runID)
		if err != nil || r.ThreadID != threadID {
			return fmt.Errorf("%w: run %s", ErrNotFound, runID)
		}
		out = r.Run
		return nil
	})
	return out, err
}

// ListRuns lists a thread's runs, newest first.
func (e *Engine) ListRuns(threadID string, limit, offset int, status string) ([]Run, error) {
	out := []Run{}
	err := e.store.ViewThread(context.Background(), threadID, func(tx ReadTx) error {
		if !tx.ThreadExists(threadID) {
			return fmt.Errorf("%w: thread %s", ErrNotFound, threadID)
		}
		// Newest first is the index's order backwards (run ids are
		// UUIDv7): a page reads its runs and the ones it skips.
		skipped := 0
		if limit <= 0 {
			return nil
		}
		return tx.EachThreadRunNewest(threadID, func(r *runRecord) bool {
			if status != "" && r.Status != status {
				return true
			}
			if skipped < offset {
				skipped++
				return true
			}
			out = append(out, r.Run)
			return len(out) < limit
		})
	})
	return out, err
}

// DeleteRun deletes a run that is not pending or running.
func (e *Engine) DeleteRun(threadID, runID string) error {
	return e.store.Update(context.Background(), func(tx Tx) error {
		r, err := tx.GetRun(runID)
		if err != nil || r.ThreadID != threadID {
			return fmt.Errorf("%w: run %s", ErrNotFound, runID)
		}
		if r.Status == RunPending || r.Status == RunRunning {
			return fmt.Errorf("%w: run %s is %s; cancel it first", ErrConflict, runID, r.Status)
		}
		if t, err := tx.GetThread(threadID); err == nil && t.Active == runID {
			// Cancelled (recorded interrupted) but still unwinding.
			return fmt.Errorf("%w: run %s is still stopping", ErrConflict, runID)
		}
		return tx.DeleteRun(threadID, runID)
	})
}

// JoinEnded is what a join of a run that has ended answers, as the
// reference server answers it from the thread as it is now: the error of
// its latest run when that failed ({"__error__": …}, whichever run is
// joined), the thread's open interrupts when it stopped at
// some ({"__interrupt__": […]}), else the thread's values. A JavaScript
// graph's thread answers its values, as the JavaScript reference does.
func (e *Engine) JoinEnded(ctx context.Context, threadID, runID string) (map[string]any, error) {
	var (
		failure    *RunFailure
		status     string
		interrupts map[string]any
		graph      string
	)
	err := e.store.ViewThread(ctx, threadID, func(tx ReadTx) error {
		r, err := tx.GetRun(runID)
		if err != nil || r.ThreadID != threadID {
			return fmt.Errorf("%w: run %s", ErrNotFound, runID)
		}
		t, err := tx.GetThread(threadID)
		if err != nil {
			return err
		}
		status, interrupts, graph = t.Status, t.Interrupts, t.Graph
		if status != ThreadError {
			return nil
		}
		// The thread's error is its latest failed run's, which may be a
		// later run than the one joined.
		return tx.EachThreadRunNewest(threadID, func(r *runRecord) bool {
			if r.Status == RunError || r.Status == RunTimeout {
				failure = r.Failure
				return false
			}
			return true
		})
	})
	if err != nil {
		return nil, err
	}
	if !e.JSGraph(graph) {
		switch {
		case failure != nil && status == ThreadError:
			return map[string]any{"__error__": failure}, nil
		case status == ThreadInterrupted && len(interrupts) > 0:
			tasks := make([]string, 0, len(interrupts))
			for id := range interrupts {
				tasks = append(tasks, id)
			}
			sort.Strings(tasks)
			var all []any
			for _, id := range tasks {
				if list, ok := interrupts[id].([]any); ok {
					all = append(all, list...)
				}
			}
			if len(all) > 0 {
				return map[string]any{"__interrupt__": all}, nil
			}
		}
	}
	st, err := e.GetState(threadID, "")
	if err != nil {
		return nil, err
	}
	return st.Values, nil
}

// Subscribe returns the run's event log, or nil when it is not live.
func (e *Engine) Subscribe(runID string) *EventLog {
	if e.distributed() {
		// Live, or ended recently enough that its stream is kept.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if ok, err := e.Bus.Exists(ctx, runID); (err == nil && ok) || !e.runSettled(runID) {
			return e.remoteLog(runID)
		}
		return nil
	}
	lr := e.liveRun(runID)
	if lr == nil {
		return nil
	}
	return lr.events
}

// RunResult is the outcome of a run, for /runs/wait.
func (e *Engine) RunResult(threadID, runID string) (Run, error) { return e.GetRun(threadID, runID) }
