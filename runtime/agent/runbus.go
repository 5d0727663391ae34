package agent

import (
	"context"
	"errors"
	"sync"
	"time"
)

// RunBus is what moves between the processes of a deployment that runs as
// API replicas and queue workers (Engine.Bus): a run's stream events,
// from the worker executing it to whichever replica holds the client;
// cancellations (and the interrupt and rollback strategies) from the
// replica that took the request to the worker; and "run queued" wake-ups,
// each taken by one idle worker.
// The threads, runs and checkpoints themselves are in the shared Store
// (PostgreSQL). A nil Bus is one process: events go through the run's
// in-memory EventLog only, cancellation and dispatch are in-process.
//
// A run's stream is fenced by attempt: Begin makes attempt the only one
// whose Append and End are kept, so a worker that lost its claim (its
// lease expired and another worker took the run over) cannot add to the
// stream the client reads. Event ids are the integers the SDKs see; a
// retried attempt continues after the last id the stream holds.
type RunBus interface {
	// Begin makes attempt the writer of run's stream and returns the
	// last event id it holds (0 for none).
	Begin(ctx context.Context, run string, attempt int) (last int, err error)
	// Append adds events (ids increasing, above the stream's last) to
	// run's stream; errBusFenced when attempt is no longer its writer.
	Append(ctx context.Context, run string, attempt int, evs []StreamEvent) error
	// End marks run's stream ended (attempt 0: without the fence, for a
	// run that never started); it expires after a while.
	End(ctx context.Context, run string, attempt int) error
	// Read waits up to block for events of run's stream after id after;
	// done once the stream has ended and every event was read.
	Read(ctx context.Context, run string, after int, block time.Duration) (evs []StreamEvent, done bool, err error)
	// Exists reports whether run has a stream (started, not expired).
	Exists(ctx context.Context, run string) (bool, error)
	// Cancel asks the worker executing run to stop it (action: interrupt or rollback).
	Cancel(ctx context.Context, run, action string) error
	// Wake queues a wake-up: thread has a run to claim. One worker takes
	// it (TakeWake), not every worker: the others would each open a claim
	// transaction that finds nothing.
	Wake(ctx context.Context, thread string) error
	// TakeWake waits up to block for a queued wake-up and takes it, so no
	// other worker gets it; "" when none came. A worker calls it only
	// while it has a free slot (replicas.go, takeWakes).
	TakeWake(ctx context.Context, block time.Duration) (thread string, err error)
	// Listen delivers cancellations, to every listener, until ctx ends (a
	// lost cancellation is caught up by the workers' lease renewals, a
	// lost wake-up by their slow poll).
	Listen(ctx context.Context, onCancel func(run, action string)) error
	Close() error
}

// errBusFenced refuses a stream write of an attempt that is no longer its run's.
var errBusFenced = errors.New("the run's stream belongs to a newer attempt")

// streamOut copies a run's events to its cross-process stream, in order,
// batching what accumulates while an append is in flight, so a graph that
// streams tokens does not wait on Redis for each.
type streamOut struct {
	bus     RunBus
	run     string
	attempt int
	mu      sync.Mutex
	pending []StreamEvent
	closing bool
	wake    chan struct{}
	done    chan struct{}
	fenced  bool
	onErr   func(error)
}

func newStreamOut(bus RunBus, run string, attempt int, onErr func(error)) *streamOut {
	o := &streamOut{bus: bus, run: run, attempt: attempt, wake: make(chan struct{}, 1), done: make(chan struct{}), onErr: onErr}
	go o.loop()
	return o
}

func (o *streamOut) push(ev StreamEvent) {
	o.mu.Lock()
	o.pending = append(o.pending, ev)
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

func (o *streamOut) loop() {
	defer close(o.done)
	for {
		o.mu.Lock()
		batch, closing := o.pending, o.closing
		o.pending = nil
		o.mu.Unlock()
		if len(batch) > 0 && !o.fenced {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := o.bus.Append(ctx, o.run, o.attempt, batch)
			cancel()
			if errors.Is(err, errBusFenced) {
				o.fenced = true
			} else if err != nil {
				o.onErr(err)
			}
			continue
		}
		if closing {
			return
		}
		<-o.wake
	}
}

// close flushes what is pending and ends the stream, unless the attempt
// was fenced (the run is another attempt's now).
func (o *streamOut) close(end bool) {
	o.mu.Lock()
	o.closing = true
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
	<-o.done
	if !end || o.fenced {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := o.bus.End(ctx, o.run, o.attempt); err != nil && !errors.Is(err, errBusFenced) {
		o.onErr(err)
	}
}

// remoteBlock is how long a reader of a remote stream waits before it
// looks at the run's record: a stream whose worker died before it ended
// it still ends for the reader once the run's record has (taken over and
// finished, or cancelled).
const remoteBlock = 2 * time.Second

// remoteLog is a run's EventLog read from the bus: each subscriber reads
// the stream itself, from the id it has, on whichever replica it is.
func (e *Engine) remoteLog(runID string) *EventLog {
	l := newEventLog()
	l.src = func(ctx context.Context, after int) ([]StreamEvent, bool, error) {
		for {
			evs, done, err := e.Bus.Read(ctx, runID, after, remoteBlock)
			if err != nil {
				if ctx.Err() != nil {
					return nil, false, ctx.Err()
				}
				// Redis is away: wait, as for an idle stream.
				select {
				case <-time.After(remoteBlock):
				case <-ctx.Done():
					return nil, false, ctx.Err()
				}
			}
			if len(evs) > 0 || done {
				return evs, done && len(evs) == 0, nil
			}
			if ctx.Err() != nil {
				return nil, false, ctx.Err()
			}
			if e.runSettled(runID) {
				// Drain what came meanwhile, then end.
				evs, _, err := e.Bus.Read(ctx, runID, after, time.Millisecond)
				if err == nil && len(evs) > 0 {
					return evs, false, nil
				}
				return nil, true, nil
			}
		}
	}
	return l
}

// runSettled reports whether a run has ended in the store and no longer
// holds its thread (or is gone).
func (e *Engine) runSettled(runID string) bool {
	settled := false
	err := e.store.View(context.Background(), func(tx ReadTx) error {
		r, err := tx.GetRun(runID)
		if errors.Is(err, ErrNotFound) {
			settled = true
			return nil
		}
		if err != nil {
			return err
		}
		if r.Status == RunPending || r.Status == RunRunning {
			return nil
		}
		active, _, err := tx.ThreadQueue(r.ThreadID)
		settled = errors.Is(err, ErrNotFound) || (err == nil && active != runID)
		return nil
	})
	return err == nil && settled
}

// distributed reports whether this engine is one of several processes
// (Bus set): runs are claimed under a lease, streams and cancellations
// go through the bus.
func (e *Engine) distributed() bool { return e.Bus != nil }

// executes reports whether this process executes runs (role all or queue).
func (e *Engine) executes() bool { return e.Role != RoleAPI }

// Engine roles (Engine.Role).
const (
	RoleAll   = "all"
	RoleAPI   = "api"
	RoleQueue = "queue"
)

// wake tells the workers (this process among them, when it is one) that
// thread has a run to claim.
func (e *Engine) wake(thread string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.Bus.Wake(ctx, thread); err != nil {
		// The workers' poll finds the run without the wake-up.
		e.Log.Warn().Err(err).Str("thread_id", thread).Msg("wake the queue workers")
		if e.executes() {
			e.dispatch(thread)
		}
	}
}

// busCancel asks whichever worker executes run to stop it.
func (e *Engine) busCancel(run, action string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.Bus.Cancel(ctx, run, action); err != nil {
		// The worker's next lease renewal reads the cancel from the run's record.
		e.Log.Warn().Err(err).Str("run_id", run).Msg("send a cancellation to the queue workers")
	}
}

// onBusCancel stops run if this process executes it.
func (e *Engine) onBusCancel(run, action string) {
	e.mu.Lock()
	lr := e.live[run]
	var cancel context.CancelCauseFunc
	if lr != nil && lr.cancel != nil {
		lr.action = action
		cancel = lr.cancel
	}
	e.mu.Unlock()
	if cancel == nil {
		return
	}
	cause := causeCancel
	if action == StrategyRollback {
		cause = causeRollback
	}
	cancel(cause)
}

// waitRemote waits until run's stream ends (or the run settles).
func (e *Engine) waitRemote(ctx context.Context, runID string) error {
	if e.runSettled(runID) {
		return nil // ended (its stream may have expired)
	}
	log := e.remoteLog(runID)
	after := 0
	for {
		evs, done, err := log.Next(ctx, after)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		after = evs[len(evs)-1].ID
	}
}
