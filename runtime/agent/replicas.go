package agent

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A deployment of several processes (Engine.Bus set): API replicas admit
// runs into the shared Store and wake the workers; queue workers claim
// runs under a lease they renew while the run goes on. A worker that dies
// stops renewing: once its lease has expired, another worker's claim
// takes the run over and executes it again as the next attempt (the
// reference retries a run whose worker died the same way, recording the
// attempt). Everything an attempt records is fenced by its claim (the
// worker and the attempt number in the run's record): a late write of a
// worker that lost its claim — a checkpoint, the run's end, a stream
// event — is refused, so no run ends twice.

const (
	defaultLease     = 30 * time.Second
	defaultPollEvery = 2 * time.Second
	// maxRunAttempts is how many workers may start a run before it fails
	// (the reference's BG_JOB_MAX_RETRIES): a run that kills its worker
	// every time must not take the deployment's workers down one by one.
	maxRunAttempts = 3
)

// errClaimLost refuses what an attempt records after another worker took
// its run over.
var errClaimLost = errors.New("the run was taken over by another worker")

// errClaimSkipped is a claim (ClaimNextRun, SkipLocked, in a locked unit)
// that found the thread's row held by another unit: nothing to claim now.
var errClaimSkipped = errors.New("the thread is another unit's at this moment")

// lockedUpdater is a Store whose claims run under row locks instead of
// SERIALIZABLE (the PostgreSQL store: pgStore.updateLocked).
type lockedUpdater interface {
	updateLocked(ctx context.Context, fn func(Tx) error) error
}

func (e *Engine) lease() time.Duration {
	if e.Lease > 0 {
		return e.Lease
	}
	return defaultLease
}

// startReplica starts what a process of a multi-process deployment runs:
// a worker (role all or queue) takes wake-ups while it has a free slot,
// listens for cancellations, scans for claimable runs as a safety net,
// and runs the cron scheduler and the TTL sweeper (serializable units of
// work, so several workers running them do not fire a cron twice). There
// is no start-up recovery: a run that was running is another worker's
// until its lease expires.
func (e *Engine) startReplica(ctx context.Context) error {
	if !e.executes() {
		return nil
	}
	if err := e.Bus.Listen(ctx, e.onBusCancel); err != nil {
		return err
	}
	e.wg.Add(4)
	go e.takeWakes(ctx)
	go e.pollClaims(ctx)
	go e.runCrons()
	go e.runTTLSweeper()
	return nil
}

// wakeBlock is how long a worker waits for a wake-up at a time: how long
// its shutdown may wait for the one it is waiting on.
const wakeBlock = time.Second

// takeWakes takes "run queued" wake-ups from the bus, one at a time and
// only while this worker has a free slot, which it holds while it waits
// and hands to the claim: a busy worker leaves wake-ups to idle ones
// instead of taking runs it would make wait. Each wake-up is taken by one
// worker, so a run costs one claim transaction, not one per worker. A
// wake-up lost (its worker died after taking it, or Redis was away) is a
// run the poll finds (pollClaims).
func (e *Engine) takeWakes(ctx context.Context) {
	defer e.wg.Done()
	failing := false
	for {
		select {
		case e.sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		thread, err := e.Bus.TakeWake(ctx, wakeBlock)
		switch {
		case ctx.Err() != nil:
			<-e.sem
			if thread != "" {
				// Stopping: another worker takes it now, not at its poll.
				pctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_ = e.Bus.Wake(pctx, thread)
				cancel()
			}
			return
		case err != nil:
			<-e.sem
			if !failing {
				e.Log.Warn().Err(err).Msg("take wake-ups from Redis; queued runs are found by the poll until it answers")
			}
			failing = true
			select {
			case <-time.After(wakeBlock):
			case <-ctx.Done():
				return
			}
		case thread == "":
			<-e.sem
			failing = false
		default:
			failing = false
			e.dispatchWith(thread, true)
		}
	}
}

// pollClaims dispatches, every PollEvery, the threads with a run to
// claim: queued behind no running run, or running under an expired lease.
func (e *Engine) pollClaims(ctx context.Context) {
	defer e.wg.Done()
	every := e.PollEvery
	if every <= 0 {
		every = defaultPollEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var threads []string
		now := time.Now().UTC()
		err := e.store.View(ctx, func(tx ReadTx) error {
			threads = threads[:0]
			return tx.ForEachBusyThread(func(th *threadRecord) error {
				if th.Active == "" {
					if len(th.Queue) > 0 {
						threads = append(threads, th.ThreadID)
					}
					return nil
				}
				if r, err := tx.GetRun(th.Active); err == nil && (r.Lease == nil || !r.Lease.Until.After(now)) {
					threads = append(threads, th.ThreadID)
				}
				return nil
			})
		})
		if err != nil {
			if ctx.Err() == nil {
				e.Log.Warn().Err(err).Msg("scan for runs to claim")
			}
			continue
		}
		for _, th := range threads {
			e.dispatch(th)
		}
	}
}

// claimLeased claims the thread's next run for this worker under a lease:
// the head of its queue, or its running run when that run's lease has
// expired (a takeover). Either way the claim counts an attempt, recorded
// in the run's metadata with the worker's name. A thread another worker
// is claiming at this moment is skipped (SKIP LOCKED): that worker has it.
func (e *Engine) claimLeased(threadID string) (*runRecord, error) {
	var claimed *runRecord
	update := e.store.Update
	if l, ok := e.store.(lockedUpdater); ok {
		update = l.updateLocked
	}
	err := update(e.ctx, func(tx Tx) error {
		claimed = nil
		now := time.Now().UTC()
		r, err := tx.ClaimNextRun(threadID, runClaim{Worker: e.WorkerID, Now: now, Lease: e.lease(), SkipLocked: true})
		if errors.Is(err, errClaimSkipped) {
			return nil
		}
		if err != nil {
			return err
		}
		if r == nil {
			if r, err = adoptUnleased(tx, threadID); err != nil || r == nil {
				return err
			}
		}
		r.Lease = &runLease{Worker: e.WorkerID, Until: now.Add(e.lease())}
		r.UpdatedAt = now
		r.Attempt++
		if r.Metadata == nil {
			r.Metadata = map[string]any{}
		}
		r.Metadata["attempt"], r.Metadata["worker"] = r.Attempt, e.WorkerID
		claimed = r
		return tx.PutRun(r)
	})
	if err == nil && claimed == nil {
		e.emptyClaims.Add(1)
	}
	if err == nil && claimed != nil && claimed.Attempt > 1 {
		e.Log.Warn().Str("run_id", claimed.RunID).Int("attempt", claimed.Attempt).Msg("run taken over: its worker stopped renewing its lease")
	}
	return claimed, err
}

// ownsClaim reports whether r, as the store holds it, is still under this
// worker's claim of the given attempt.
func (e *Engine) ownsClaim(r *runRecord, attempt int) bool {
	return r.Lease != nil && r.Lease.Worker == e.WorkerID && r.Attempt == attempt
}

// holdLease renews the run's lease every third of its length until stop
// is called. A renewal that finds the run under another claim marks the
// attempt lost and stops it; one that finds a cancel recorded stops the
// run as the cancel said (the cancellation's message may have been lost).
func (e *Engine) holdLease(r *runRecord, lr *liveRun, cancel context.CancelCauseFunc) (stop func()) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(e.lease() / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			var action string
			lost := false
			err := e.store.Update(context.Background(), func(tx Tx) error {
				action, lost = "", false
				cur, err := tx.GetRun(r.RunID)
				if errors.Is(err, ErrNotFound) {
					lost = true // deleted with its thread
					return nil
				}
				if err != nil {
					return err
				}
				if !e.ownsClaim(cur, r.Attempt) {
					lost = true
					return nil
				}
				action = cur.CancelAction
				cur.Lease.Until = time.Now().UTC().Add(e.lease())
				return tx.PutRun(cur)
			})
			switch {
			case err != nil:
				e.Log.Warn().Err(err).Str("run_id", r.RunID).Msg("renew the run's lease")
			case lost:
				lr.lost.Store(true)
				cancel(errClaimLost)
				return
			case action != "":
				e.onBusCancel(r.RunID, action)
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

// beginAttempt prepares the run's stream on the bus for this attempt: the
// local log continues after the last id an earlier attempt left, and
// copies every event to the bus.
func (e *Engine) beginAttempt(r *runRecord, lr *liveRun) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	last, err := e.Bus.Begin(ctx, r.RunID, r.Attempt)
	if err != nil {
		e.Log.Error().Err(err).Str("run_id", r.RunID).Msg("the run's events will not reach other replicas")
	}
	lr.events.mu.Lock()
	lr.events.base = last
	lr.events.out = newStreamOut(e.Bus, r.RunID, r.Attempt, func(err error) {
		e.Log.Warn().Err(err).Str("run_id", r.RunID).Msg("copy the run's events to the bus")
	})
	lr.events.mu.Unlock()
}

// tooManyAttempts is the error of a run started more than maxRunAttempts times.
func tooManyAttempts(r *runRecord) error {
	return fmt.Errorf("run %s exceeded its max attempts (%d): the workers that ran it stopped before it ended "+
		"(killed, out of memory, or their host went away); their logs say why", r.RunID, maxRunAttempts)
}

// claimKey is the context key of an attempt's claim (checkpoint fencing).
type claimKey struct{}

// attemptClaim is the claim a host's checkpoint writes are made under.
type attemptClaim struct {
	Worker  string
	Attempt int
}

// claimContext is ctx carrying the claim of this process's attempt of
// run, when the engine is distributed and executes it: the store refuses
// the write once the run is under another claim (fenceClaim).
func (e *Engine) claimContext(ctx context.Context, run string) context.Context {
	if !e.distributed() || run == "" {
		return ctx
	}
	e.mu.Lock()
	lr := e.live[run]
	e.mu.Unlock()
	attempt := 0
	if lr != nil {
		attempt = lr.attempt
	}
	return context.WithValue(ctx, claimKey{}, attemptClaim{Worker: e.WorkerID, Attempt: attempt})
}

// fenceClaim refuses, in tx, a write made under ctx's claim once the run
// is under another (a worker that lost its lease writing late).
func fenceClaim(ctx context.Context, tx Tx, run string) error {
	c, ok := ctx.Value(claimKey{}).(attemptClaim)
	if !ok || run == "" {
		return nil
	}
	r, err := tx.GetRun(run)
	if err != nil {
		return fmt.Errorf("%w: run %s: %v", ErrFenced, run, err)
	}
	if r.Lease == nil || r.Lease.Worker != c.Worker || r.Attempt != c.Attempt {
		return fmt.Errorf("%w: run %s is under a newer attempt's claim", ErrFenced, run)
	}
	return nil
}

// markVictim records on the running run an interrupt or rollback strategy
// displaces how it is to end (its worker may be another process).
func markVictim(tx Tx, run, strategy string) error {
	v, err := tx.GetRun(run)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if v.CancelAction == StrategyRollback {
		return nil
	}
	v.CancelAction = StrategyInterrupt
	if strategy == StrategyRollback {
		v.CancelAction = StrategyRollback
	}
	return tx.PutRun(v)
}

// handBack ends this worker's claim on a run it did not finish because it
// is stopping: the lease expires now, and the other workers are woken to
// take the run over without waiting for it to run out.
func (e *Engine) handBack(r *runRecord) {
	err := e.store.Update(context.Background(), func(tx Tx) error {
		cur, err := tx.GetRun(r.RunID)
		if err != nil || !e.ownsClaim(cur, r.Attempt) {
			return err
		}
		cur.Lease.Until = time.Now().UTC()
		return tx.PutRun(cur)
	})
	if err != nil {
		e.Log.Warn().Err(err).Str("run_id", r.RunID).Msg("hand a run back at shutdown; another worker takes it over when its lease expires")
		return
	}
	e.Log.Info().Str("run_id", r.RunID).Msg("run handed back at shutdown")
	e.wake(r.ThreadID)
}

// adoptUnleased returns the thread's running run when it runs under no
// lease: one process (without Redis) claimed it and stopped, a restart
// being its recovery. A deployment that became replicas has no such
// restart, so a worker takes the run over as its second attempt (the
// first was unleased), or ends it as its recorded cancel said. A process
// still executing it would be a deployment that mixes one-process and
// replica agents on one database, which is not supported.
func adoptUnleased(tx Tx, threadID string) (*runRecord, error) {
	active, _, err := tx.ThreadQueue(threadID)
	if errors.Is(err, ErrNotFound) || active == "" {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r, err := tx.GetRun(active)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil || r.Lease != nil {
		return nil, err
	}
	r.Attempt = max(r.Attempt, 1)
	return r, nil
}
