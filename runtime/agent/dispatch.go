package agent

import (
	"context"
	"errors"
	"time"
)

// dispatch makes sure a goroutine is working through the thread's queue.
func (e *Engine) dispatch(threadID string) { e.dispatchWith(threadID, false) }

// dispatchWith is dispatch; held says the caller holds a worker slot (a
// wake-up taken from the bus, replicas.go), which the thread's first
// claim uses, or which is released.
func (e *Engine) dispatchWith(threadID string, held bool) {
	release := func() {
		if held {
			held = false
			<-e.sem
		}
	}
	if !e.executes() {
		release()
		return // an API replica: the workers claim (wake-ups)
	}
	e.mu.Lock()
	if e.disp[threadID] {
		if e.distributed() {
			// Its dispatcher looks again before it stops: this worker
			// took the wake-up, so no other worker will claim the run.
			e.again[threadID] = true
		}
		e.mu.Unlock()
		release()
		return
	}
	e.disp[threadID] = true
	e.mu.Unlock()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			ok, pending := e.waitHead(threadID, release)
			if !ok {
				release()
				e.releaseDispatch(threadID)
				return
			}
			// Of several workers, a thread with no run at all (the common
			// case once this worker's run ended) is not claimed: a claim
			// locks the thread's row, a commit PostgreSQL flushes.
			if e.distributed() && !pending {
				release()
				if e.stopDispatch(threadID) {
					return
				}
				continue
			}
			if held {
				held = false // the slot is this claim's now
			} else {
				select {
				case e.sem <- struct{}{}:
				case <-e.ctx.Done():
					e.releaseDispatch(threadID)
					return
				}
			}
			r, err := e.claimNext(threadID)
			if err != nil || r == nil {
				<-e.sem
				if e.distributed() {
					if err == nil && !e.stopDispatch(threadID) {
						continue
					}
					if err != nil {
						e.releaseDispatch(threadID)
					}
					return
				}
				e.mu.Lock()
				delete(e.disp, threadID)
				e.mu.Unlock()
				// A run queued after our last look must not be stranded.
				if err == nil && e.hasQueued(threadID) {
					e.dispatch(threadID)
				}
				return
			}
			e.execute(r)
			<-e.sem
		}
	}()
}

// stopDispatch ends the thread's dispatcher unless a wake-up for the
// thread came while it ran (dispatchWith): then it is false, and the
// dispatcher looks again.
func (e *Engine) stopDispatch(threadID string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.again[threadID] {
		delete(e.again, threadID)
		return false
	}
	delete(e.disp, threadID)
	return true
}

// waitHead waits, without holding a worker, until the run at the head of
// the thread's queue may start (after_seconds); beforeWait is called
// before it waits (it gives a held worker slot back). It looks again at
// least every 250 ms, since the head may be cancelled or overtaken
// meanwhile. ok is false when the engine stops; pending is whether the
// thread has a run (running or queued) a claim could take.
func (e *Engine) waitHead(threadID string, beforeWait func()) (ok, pending bool) {
	for {
		var wait time.Duration
		pending = false
		err := e.store.ViewThread(context.Background(), threadID, func(tx ReadTx) error {
			active, queue, err := tx.ThreadQueue(threadID)
			if errors.Is(err, ErrNotFound) {
				return nil // deleted
			}
			if err != nil {
				return err
			}
			pending = active != "" || len(queue) > 0
			if active != "" || len(queue) == 0 {
				return nil
			}
			if nb, err := tx.RunNotBefore(queue[0]); err == nil && nb != nil {
				wait = time.Until(*nb)
			}
			return nil
		})
		if err != nil {
			pending = true // the look failed: the claim decides
		}
		if wait <= 0 {
			return true, pending
		}
		beforeWait()
		select {
		case <-time.After(min(wait, 250*time.Millisecond)):
		case <-e.ctx.Done():
			return false, pending
		}
	}
}

func (e *Engine) releaseDispatch(threadID string) {
	e.mu.Lock()
	delete(e.disp, threadID)
	delete(e.again, threadID)
	e.mu.Unlock()
}

// hasQueued reports whether the thread is idle with runs queued. It is
// asked after every run, so it decodes only the fields it needs, not the
// thread's values.
func (e *Engine) hasQueued(threadID string) bool {
	q := false
	_ = e.store.ViewThread(context.Background(), threadID, func(tx ReadTx) error {
		if active, queue, err := tx.ThreadQueue(threadID); err == nil {
			q = active == "" && len(queue) > 0
		}
		return nil
	})
	return q
}

// claimNext marks the oldest queued run of an idle thread running.
//
// Most calls find nothing to claim: every run claimed at admission ends by
// calling dispatch, which lands here once. A read transaction answers
// those; only a claim pays for a durable commit (an fsync'd meta page even
// when nothing changed). The write transaction checks again, so a run
// queued or claimed in between is handled either way.
func (e *Engine) claimNext(threadID string) (*runRecord, error) {
	if e.distributed() {
		return e.claimLeased(threadID)
	}
	if !e.hasQueued(threadID) {
		return nil, nil
	}
	var claimed *runRecord
	err := e.store.Update(context.Background(), func(tx Tx) error {
		// One process: the claim holds until the run ends (Lease 0).
		var err error
		claimed, err = tx.ClaimNextRun(threadID, runClaim{Now: time.Now().UTC()})
		return err
	})
	return claimed, err
}
