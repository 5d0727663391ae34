package agent

import (
	"context"
	"time"
)

// dispatch makes sure a goroutine is working through the thread's queue.
func (e *Engine) dispatch(threadID string) {
	if !e.executes() {
		return // an API replica: the workers claim (wake-ups)
	}
	e.mu.Lock()
	if e.disp[threadID] {
		e.mu.Unlock()
		return
	}
	e.disp[threadID] = true
	e.mu.Unlock()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			if !e.waitHead(threadID) {
				e.releaseDispatch(threadID)
				return
			}
			select {
			case e.sem <- struct{}{}:
			case <-e.ctx.Done():
				e.releaseDispatch(threadID)
				return
			}
			r, err := e.claimNext(threadID)
			if err != nil || r == nil {
				<-e.sem
				e.mu.Lock()
				delete(e.disp, threadID)
				e.mu.Unlock()
				// A run queued after our last look must not be stranded.
				// (Of several workers, its admission's wake-up and the
				// poll see to that: the thread may be another worker's.)
				if err == nil && !e.distributed() && e.hasQueued(threadID) {
					e.dispatch(threadID)
				}
				return
			}
			e.execute(r)
			<-e.sem
		}
	}()
}

// waitHead waits, without holding a worker, until the run at the head of
// the thread's queue may start (after_seconds). It looks again at least
// every 250 ms, since the head may be cancelled or overtaken meanwhile.
// It is false when the engine stops.
func (e *Engine) waitHead(threadID string) bool {
	for {
		var wait time.Duration
		_ = e.store.ViewThread(context.Background(), threadID, func(tx ReadTx) error {
			active, queue, err := tx.ThreadQueue(threadID)
			if err != nil || active != "" || len(queue) == 0 {
				return nil
			}
			if nb, err := tx.RunNotBefore(queue[0]); err == nil && nb != nil {
				wait = time.Until(*nb)
			}
			return nil
		})
		if wait <= 0 {
			return true
		}
		select {
		case <-time.After(min(wait, 250*time.Millisecond)):
		case <-e.ctx.Done():
			return false
		}
	}
}

func (e *Engine) releaseDispatch(threadID string) {
	e.mu.Lock()
	delete(e.disp, threadID)
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
