package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"slipway/storage"
)

// RunCreate is a run request, decoded and validated by the API.
type RunCreate struct {
	AssistantID       string         `json:"assistant_id"`
	Input             map[string]any `json:"input"`
	Command           map[string]any `json:"command"`
	Metadata          map[string]any `json:"metadata"`
	Config            map[string]any `json:"config"`
	Context           map[string]any `json:"context"`
	StreamMode        []string       `json:"stream_mode"`
	StreamResumable   bool           `json:"stream_resumable"`
	OnDisconnect      string         `json:"on_disconnect"`
	MultitaskStrategy string         `json:"multitask_strategy"`
	IfNotExists       string         `json:"if_not_exists"`
	AfterSeconds      float64        `json:"after_seconds"`
	OnCompletion      string         `json:"on_completion"`
	StreamSubgraphs   bool           `json:"stream_subgraphs"`
	InterruptBefore   any            `json:"interrupt_before"`
	InterruptAfter    any            `json:"interrupt_after"`
	CheckpointID      string         `json:"checkpoint_id"`
	// Checkpoint is checkpoint_id as the SDK's object ({checkpoint_id, ...}).
	Checkpoint *CheckpointRef `json:"checkpoint"`
}

// CreateRun admits a run on thread threadID ("" for a stateless run on a
// temporary thread). The multitask check and the insert are one
// transaction, so concurrent requests on a busy thread see each other.
//
// It returns the run's event log, created before the run can start, so a
// streaming caller sees every event even of a run that ends at once.
func (e *Engine) CreateRun(threadID string, rc RunCreate) (Run, *EventLog, error) {
	return e.createRun(trace.SpanContext{}, threadID, rc)
}

// CreateRunIn is CreateRun for a request: the run's span (otel.go) is a
// child of ctx's.
func (e *Engine) CreateRunIn(ctx context.Context, threadID string, rc RunCreate) (Run, *EventLog, error) {
	return e.createRun(trace.SpanContextFromContext(ctx), threadID, rc)
}

func (e *Engine) createRun(parent trace.SpanContext, threadID string, rc RunCreate) (Run, *EventLog, error) {
	temporary := threadID == ""
	if temporary {
		threadID = storage.NewID().String()
	}
	// An idle thread's run with a free worker is claimed in the admission
	// transaction itself: one commit fewer per run than queueing it for
	// the dispatcher, which claims in a commit of its own.
	// Of several processes, every run is claimed under a lease by a
	// worker (replicas.go), never at admission.
	slot := false
	if !e.distributed() {
		select {
		case e.sem <- struct{}{}:
			slot = true
		default:
		}
	}
	var ad admission
	var prepared []string
	admitIn := func(tx Tx) error {
		var err error
		if ad, err = e.admit(tx, threadID, rc, temporary, slot); err != nil {
			return err
		}
		// The event log exists before the commit: once committed, a
		// dispatcher already working through the thread's queue may claim
		// and finish the run at once, and a log made after that would
		// never be closed (a join or stream would wait forever).
		if !e.distributed() {
			prepared = append(prepared, ad.run.RunID)
			e.prepareEvents(ad.run.RunID)
			e.setRunParent(ad.run.RunID, parent)
		}
		return nil
	}
	// A journaled write (store_writebehind.go): the thread's record, the run's
	// and its index row; a thread created with a default TTL also writes
	// the TTL index, and takes a bbolt commit.
	err := e.store.UpdateThread(context.Background(), threadID, false, func(tx Tx) error {
		if e.TTL.DefaultTTL > 0 && !tx.ThreadExists(threadID) {
			return errNotHot
		}
		return admitIn(tx)
	})
	if errors.Is(err, errNotHot) {
		err = e.store.Update(context.Background(), admitIn)
	}
	e.dropUncommitted(prepared, ad.run.RunID, err)
	if slot && (err != nil || ad.claimed == nil) {
		<-e.sem
	}
	if err != nil {
		return Run{}, nil, err
	}
	e.Metrics.runCreated()
	if e.distributed() {
		// A worker executes it; its events come back through the bus.
		e.settle(threadID, ad)
		return ad.run, e.remoteLog(ad.run.RunID), nil
	}
	lr := e.prepareEvents(ad.run.RunID)
	if ad.claimed != nil {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			e.execute(ad.claimed)
			<-e.sem
			// Runs queued behind this one meanwhile are the dispatcher's.
			e.dispatch(threadID)
		}()
		return ad.run, lr.events, nil
	}
	e.settle(threadID, ad)
	return ad.run, lr.events, nil
}

// settle acts on a committed admission that did not claim a worker: it
// stops the running run an interrupt or rollback strategy displaced, and
// hands the thread's queue to the dispatcher.
func (e *Engine) settle(threadID string, ad admission) {
	for _, id := range ad.dropped {
		e.endPending(id)
	}
	if e.distributed() {
		// The victim runs on some worker: the cancellation reaches it
		// there (its lease renewal reads it from the record otherwise).
		switch {
		case ad.victim == "":
		case ad.run.MultitaskStrategy == StrategyRollback:
			e.busCancel(ad.victim, StrategyRollback)
		default:
			e.busCancel(ad.victim, StrategyInterrupt)
		}
		e.wake(threadID)
		return
	}
	switch {
	case ad.victim == "":
	case ad.run.MultitaskStrategy == StrategyRollback:
		e.cancelLive(ad.victim, StrategyRollback, causeRollback)
	default:
		e.cancelLive(ad.victim, StrategyInterrupt, causeInterrupt)
	}
	e.dispatch(threadID)
}

// admission is what admitting a run decided, for CreateRun to act on
// after the commit.
type admission struct {
	run Run
	// claimed is the run when it took the free worker slot it was offered
	// (the thread was idle and the run may start now).
	claimed *runRecord
	// victim is the running run an interrupt or rollback strategy stops.
	victim string
	// dropped are the queued runs that strategy stopped before they started.
	dropped []string
}

// admit decides a run request in tx: it finds the thread (or creates it,
// for a temporary run or if_not_exists=create), applies the multitask
// strategy when the thread is busy, and writes the run, its index entry
// and the thread. slot says a worker is reserved for the run if it can
// start at once.
func (e *Engine) admit(tx Tx, threadID string, rc RunCreate, temporary, slot bool) (admission, error) {
	a, err := e.ResolveAssistant(tx, rc.AssistantID)
	if err != nil {
		return admission{}, err
	}
	now := e.now()
	t, err := tx.GetThread(threadID)
	switch {
	case err == nil:
		if !t.busy() {
			// As the reference: an idle thread takes the graph and
			// assistant of the run it is given, in its metadata.
			if t.Metadata == nil {
				t.Metadata = map[string]any{}
			}
			t.Metadata["graph_id"], t.Metadata["assistant_id"] = a.GraphID, a.AssistantID
		}
	case temporary || rc.IfNotExists == "create":
		t = &threadRecord{Thread: Thread{ThreadID: threadID, CreatedAt: now, UpdatedAt: now,
			Metadata: map[string]any{"graph_id": a.GraphID, "assistant_id": a.AssistantID}, Status: ThreadIdle, Values: map[string]any{}}}
		if err := e.defaultTTL(tx, t); err != nil {
			return admission{}, err
		}
	default:
		return admission{}, fmt.Errorf("%w: thread %s", ErrNotFound, threadID)
	}
	if _, ok := e.Graphs[a.GraphID].(*HostGraph); ok {
		t.Graph = a.GraphID
	}
	strategy := cmp.Or(rc.MultitaskStrategy, StrategyEnqueue)
	r := runRecord{Run: Run{RunID: storage.NewID().String(), ThreadID: threadID, AssistantID: a.AssistantID,
		CreatedAt: now, UpdatedAt: now, Status: RunPending, Metadata: runMetadata(*a, t.Metadata, rc), MultitaskStrategy: strategy,
		Kwargs: kwargs(rc)}, Temporary: temporary}
	if r.Metadata == nil {
		r.Metadata = map[string]any{}
	}
	if rc.AfterSeconds > 0 {
		nb := now.Add(time.Duration(rc.AfterSeconds * float64(time.Second)))
		r.NotBefore = &nb
	}
	var ad admission
	switch {
	case t.busy() && strategy == StrategyReject:
		return admission{}, ErrBusy
	case t.busy() && (strategy == StrategyInterrupt || strategy == StrategyRollback):
		// As on the reference servers, the newer run stops every run in
		// flight on the thread: the running one after commit, the queued
		// ones here (they never start: interrupted, or deleted by a
		// rollback). A queued run may be one a worker has not claimed yet.
		ad.victim = t.Active
		if e.distributed() && t.Active != "" {
			// Recorded for the victim's worker, which reads it when it
			// renews its lease should the cancellation's message be lost.
			if err := markVictim(tx, t.Active, strategy); err != nil {
				return admission{}, err
			}
		}
		for _, id := range t.Queue {
			if err := dropPending(tx, threadID, id, strategy, now); err != nil {
				return admission{}, err
			}
		}
		ad.dropped = t.Queue
		t.Queue = []string{r.RunID}
	case !t.busy() && slot && r.NotBefore == nil:
		r.Status, r.FirstSeq = RunRunning, t.Seq
		t.Active = r.RunID
		ad.claimed = &r
	default:
		t.Queue = append(t.Queue, r.RunID)
	}
	t.Status, t.UpdatedAt = ThreadBusy, now
	// A thread keeps the config its runs were given (threadConfig); a
	// later run of a JavaScript graph continues with it (runRequest).
	if len(rc.Config) > 0 {
		t.Config = mergeConfig(t.Config, rc.Config)
	}
	if err := tx.PutRun(&r); err != nil {
		return admission{}, err
	}
	if err := tx.IndexRun(threadID, r.RunID); err != nil {
		return admission{}, err
	}
	ad.run = r.Run
	return ad, tx.PutThread(t)
}

func kwargs(rc RunCreate) map[string]any {
	k := map[string]any{"input": rc.Input, "config": rc.Config, "context": rc.Context, "stream_mode": rc.StreamMode}
	if rc.StreamResumable {
		k["stream_resumable"] = true
	}
	if rc.Command != nil {
		k["command"] = rc.Command
	}
	if rc.StreamSubgraphs {
		k["stream_subgraphs"] = true
	}
	if rc.InterruptBefore != nil {
		k["interrupt_before"] = rc.InterruptBefore
	}
	if rc.InterruptAfter != nil {
		k["interrupt_after"] = rc.InterruptAfter
	}
	if rc.CheckpointID != "" {
		k["checkpoint_id"] = rc.CheckpointID
	} else if rc.Checkpoint != nil && rc.Checkpoint.CheckpointID != "" {
		k["checkpoint_id"] = rc.Checkpoint.CheckpointID
	}
	if rc.AfterSeconds > 0 {
		k["after_seconds"] = rc.AfterSeconds
	}
	return k
}

// dropUncommitted drops the event logs prepared in attempts of an
// admission transaction that did not commit: every one but committed's,
// and that one too when the transaction failed (err).
func (e *Engine) dropUncommitted(prepared []string, committed string, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, rid := range prepared {
		if err != nil || rid != committed {
			delete(e.live, rid)
		}
	}
}

// prepareEvents creates the run's event log before anyone can subscribe.
func (e *Engine) prepareEvents(runID string) *liveRun {
	e.mu.Lock()
	defer e.mu.Unlock()
	lr := e.live[runID]
	if lr == nil {
		lr = &liveRun{events: newEventLog(), done: make(chan struct{})}
		e.live[runID] = lr
	}
	return lr
}

func (e *Engine) liveRun(runID string) *liveRun {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.live[runID]
}
