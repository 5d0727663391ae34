package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"slipway/runtime/agent/hosts"
	"slipway/storage"
)

// execute runs a claimed run to its end and records the outcome, the
// states it produced, and the thread's new status in one transaction.
func (e *Engine) execute(r *runRecord) {
	started := time.Now()
	e.Metrics.runStarted(r, started)
	lr := e.prepareEvents(r.RunID)
	ctx, cancel := context.WithCancelCause(e.ctx)
	e.mu.Lock()
	lr.cancel = cancel
	lr.attempt = r.Attempt
	pending := lr.action
	if r.CancelAction != "" {
		// Taken over after its cancel was recorded: it ends as that said.
		pending = r.CancelAction
	}
	e.mu.Unlock()
	if e.distributed() {
		e.beginAttempt(r, lr)
		defer e.holdLease(r, lr, cancel)()
	}
	switch pending {
	case "":
	case StrategyRollback:
		cancel(causeRollback)
	default:
		cancel(causeCancel)
	}
	ctx, stop := context.WithTimeout(ctx, e.Timeout)
	defer stop()
	span := e.startRunSpan(r, lr)

	graph, values, req, err := e.runRequest(r)
	lr.events.publish("metadata", map[string]any{"run_id": r.RunID, "attempt": max(r.Attempt, 1)})
	if err == nil && r.Attempt > maxRunAttempts {
		err = tooManyAttempts(r)
	}
	var (
		outcome *hostOutcome
		cps     []pendingCheckpoint
	)
	if hg, ok := graph.(*HostGraph); ok && err == nil {
		e.store.OpenFence(r.ThreadID, r.RunID)
		outcome, err = hg.runHost(ctx, r, req)
		if err != nil && e.ctx.Err() == nil && !errors.Is(err, hosts.ErrHostDied) && !errors.Is(context.Cause(ctx), causeRollback) {
			// The run failed in the graph, was cancelled or timed out: the
			// thread shows the state it reached, read back from its
			// checkpoints, as on the reference servers (a rollback deletes
			// them, and the thread keeps the values it had).
			// Bounded, as other state calls are: a host restarting after
			// a run that would not unwind may not answer soon.
			sctx, sstop := context.WithTimeout(e.ctx, hostCallTimeout)
			if st, serr := hg.state(sctx, map[string]any{"graph_id": hg.ID, "thread_id": r.ThreadID}); serr == nil {
				outcome = &hostOutcome{Values: st.Values}
			}
			sstop()
		}
	} else if err == nil {
		cps, err = runBuiltin(ctx, lr.events, graph, req, values)
	}
	// An attempt that does not end its run: the run goes on elsewhere.
	leave := func(why string) {
		endRunSpan(span, req.GraphID, why, nil)
		lr.events.end(false)
		close(lr.done)
		e.release(r, lr)
	}
	if e.distributed() && err != nil && !lr.lost.Load() && errors.Is(context.Cause(ctx), context.Canceled) && e.ctx.Err() != nil {
		// Cut short because this worker is stopping (SIGTERM: a redeploy,
		// a scale-down), not by a cancel, a timeout or the graph: the run
		// is handed back, not ended, and another worker takes it over at
		// once as its next attempt.
		e.handBack(r)
		leave("handed_back")
		return
	}
	status, runErr := e.runStatus(ctx, err)
	if lr.lost.Load() {
		// Another worker took the run over: it records the run's end.
		e.Log.Warn().Str("run_id", r.RunID).Int("attempt", r.Attempt).Msg("run taken over by another worker; this attempt stops")
		leave("taken_over")
		return
	}
	ended, lost := e.finish(r, status, runErr, cps, outcome)
	if lost {
		e.Log.Warn().Str("run_id", r.RunID).Int("attempt", r.Attempt).Msg("run taken over by another worker before this attempt recorded its end")
		leave("taken_over")
		return
	}
	e.Metrics.runEnded(ended, time.Since(started))
	endRunSpan(span, req.GraphID, ended, runErr)
	if runErr != nil && status != RunInterrupted && status != "rollback" {
		lr.events.publish("error", map[string]any{"error": errorName(status, runErr), "message": errorMessage(runErr)})
	}
	lr.events.close()
	close(lr.done)
	e.release(r, lr)
}

// runRequest reads what a run needs to start: its graph, the thread's
// values, and the request with the assistant's, thread's and run's
// config, context and metadata merged.
func (e *Engine) runRequest(r *runRecord) (graph Graph, values map[string]any, req Request, err error) {
	err = e.store.ViewThread(context.Background(), r.ThreadID, func(tx ReadTx) error {
		t, err := tx.GetThread(r.ThreadID)
		if err != nil {
			return err
		}
		a, err := e.ResolveAssistant(tx, r.AssistantID)
		if err != nil {
			return err
		}
		g, ok := e.Graphs[a.GraphID]
		if !ok {
			return fmt.Errorf("graph %q is not served by this agent", a.GraphID)
		}
		graph, values = g, clone(t.Values)
		in, _ := r.Kwargs["input"].(map[string]any)
		cfg, _ := r.Kwargs["config"].(map[string]any)
		cx, _ := r.Kwargs["context"].(map[string]any)
		cmd, _ := r.Kwargs["command"].(map[string]any)
		layers := []map[string]any{a.Config}
		if e.JSGraph(a.GraphID) {
			// The JavaScript reference runs a thread's later runs with the
			// config its earlier ones were given; the Python reference
			// (and so the hosted product) only with the assistant's and
			// their own.
			layers = append(layers, t.Config)
		}
		req = Request{Input: in, Command: cmd, Config: mergeConfig(append(layers, cfg)...), Context: merge(a.Context, cx),
			ThreadID: r.ThreadID, RunID: r.RunID, AssistantID: a.AssistantID, GraphID: a.GraphID,
			Metadata: merge(merge(a.Metadata, t.Metadata), r.Metadata)}
		return nil
	})
	return graph, values, req, err
}

// runBuiltin runs a graph of this binary (echo, command graphs) from the
// thread's values, publishing its events, and returns the checkpoints it
// produced: the input's, one per update, and one for its interrupts.
func runBuiltin(ctx context.Context, events *EventLog, graph Graph, req Request, values map[string]any) ([]pendingCheckpoint, error) {
	var (
		cps        []pendingCheckpoint
		interrupts []any
		step       int
	)
	// The input is the first update: its messages join the state.
	if req.Input != nil {
		var err error
		if values, err = ApplyUpdate(values, inputUpdate(req.Input)); err != nil {
			return nil, err
		}
		cps = append(cps, pendingCheckpoint{values: clone(values), source: "input", step: -1, writes: map[string]any{"__start__": req.Input}})
		events.publish("values", values)
	}
	req.Values = clone(values)
	err := graph.Run(ctx, req, func(node string, update map[string]any, extra []Event) error {
		for _, ev := range extra {
			if ev.Mode == "__interrupt__" {
				// The graph stopped to ask for input: the run still
				// succeeds, and its last state carries the interrupt
				// for the client to answer with command.resume.
				intr := map[string]any{"value": ev.Data, "id": storage.NewID().String()}
				interrupts = append(interrupts, intr)
				events.publish("updates", map[string]any{"__interrupt__": []any{intr}})
				continue
			}
			if ev.Mode == "__replace__" {
				values = clone(update)
				step++
				cps = append(cps, pendingCheckpoint{values: clone(values), source: "loop", step: step, writes: map[string]any{"__replace__": nil}})
				events.publish("values", values)
				return nil
			}
			events.publish(ev.Mode, ev.Data)
		}
		if update == nil {
			return nil
		}
		next, err := ApplyUpdate(values, update)
		if err != nil {
			return fmt.Errorf("%w: node %s: %v", ErrProtocol, node, err)
		}
		values = next
		step++
		cps = append(cps, pendingCheckpoint{values: clone(values), source: "loop", step: step, writes: map[string]any{node: update}})
		events.publish("updates", map[string]any{node: update})
		events.publish("values", values)
		return nil
	})
	if err != nil {
		return cps, err
	}
	if len(interrupts) > 0 {
		step++
		cps = append(cps, pendingCheckpoint{values: clone(values), source: "loop", step: step,
			writes: map[string]any{"__interrupt__": interrupts}, interrupts: interrupts})
	}
	return cps, nil
}

// runStatus is how a run ended, from why its context ended and the error
// it returned; the error is the one to record (a timeout's says so).
func (e *Engine) runStatus(ctx context.Context, err error) (string, error) {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, causeRollback):
		return "rollback", err
	case errors.Is(cause, causeInterrupt), errors.Is(cause, causeCancel):
		return RunInterrupted, err
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return RunTimeout, fmt.Errorf("the run exceeded its timeout of %v", e.Timeout)
	case err != nil:
		return RunError, err
	}
	return RunSuccess, nil
}

// release drops a finished run's event log from the engine. Subscribers
// hold the log itself; the engine keeps it only for resumable streams,
// whose clients may come back with Last-Event-ID.
func (e *Engine) release(r *runRecord, lr *liveRun) {
	forget := func() {
		e.mu.Lock()
		if e.live[r.RunID] == lr {
			delete(e.live, r.RunID)
		}
		e.mu.Unlock()
	}
	if resumable, _ := r.Kwargs["stream_resumable"].(bool); resumable && !e.distributed() {
		time.AfterFunc(10*time.Minute, forget)
	} else {
		forget()
	}
}

// errorMessage is an error event's message: a graph's error as it threw it
// (its type is the event's "error"), anything else in full.
func errorMessage(err error) string {
	var he *hosts.Error
	if errors.As(err, &he) && he.Message != "" {
		return he.Message
	}
	return err.Error()
}

func runFailure(status string, err error) *RunFailure {
	return &RunFailure{Error: errorName(status, err), Message: errorMessage(err)}
}

// threadError is what a thread shows of its run's end (Thread.Error): a
// cancel as the Python reference shows it, with the cancel's reason or
// its default words.
func threadError(status string, err error, reason string) *RunFailure {
	switch {
	case status == "rollback":
		return &RunFailure{Error: "UserRollback", Message: cmp.Or(reason, "User requested rollback of the run")}
	case status == RunInterrupted:
		return &RunFailure{Error: "UserInterrupt", Message: cmp.Or(reason, "User interrupted the run")}
	case (status == RunError || status == RunTimeout) && err != nil:
		return runFailure(status, err)
	}
	return nil
}

func errorName(status string, err error) string {
	if status == RunTimeout {
		return "TimeoutError"
	}
	var he *hosts.Error
	if errors.As(err, &he) && he.Type != "" {
		return he.Type
	}
	if errors.Is(err, hosts.ErrHostDied) {
		return "HostExited"
	}
	if errors.Is(err, ErrProtocol) {
		return "GraphProtocolError"
	}
	return "GraphError"
}

type pendingCheckpoint struct {
	values     map[string]any
	source     string
	step       int
	writes     any
	interrupts []any
}

func inputUpdate(in map[string]any) map[string]any {
	up := map[string]any{}
	for k, v := range in {
		if k != "sleep" {
			up[k] = v
		}
	}
	return up
}

func merge(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// mergeConfig layers run configs, later ones winning, with their
// configurable maps merged key by key rather than replaced: a run's
// configurable adds to its assistant's and its thread's.
func mergeConfig(layers ...map[string]any) map[string]any {
	out := map[string]any{}
	configurable := map[string]any{}
	for _, l := range layers {
		for k, v := range l {
			if c, ok := v.(map[string]any); ok && k == "configurable" {
				for ck, cv := range c {
					configurable[ck] = cv
				}
				continue
			}
			out[k] = v
		}
	}
	if len(configurable) > 0 {
		out["configurable"] = configurable
	}
	return out
}

// finish records a run's end. A rolled-back run disappears with what it
// wrote; any other run keeps the states it produced.
//
// A host graph's run (outcome, when the host reported its end) wrote its
// checkpoints as it went; the thread record takes the values and
// interrupts the host computed from them.
func (e *Engine) finish(r *runRecord, status string, runErr error, cps []pendingCheckpoint, outcome *hostOutcome) (ended string, lost bool) {
	reported := status
	// The end of a run is a journaled write (store_writebehind.go) of its
	// thread's and its own record, unless it deletes or writes more: a
	// rollback, a temporary thread, a built-in graph's checkpoints.
	end := func(tx Tx, hot bool) error {
		// The run's record as stored: its claim, its recorded cancel.
		cur, err := tx.GetRun(r.RunID)
		if err != nil {
			cur = nil
		}
		// Only the attempt under the run's claim ends it: a worker that
		// lost its lease while finishing records nothing.
		if e.distributed() && cur != nil && !e.ownsClaim(cur, r.Attempt) {
			return errClaimLost
		}
		status := cancelledStatus(cur, reported)
		ended = outcomeOf(status, false) // the metrics' outcome label
		reason := ""
		if cur != nil {
			reason = cur.CancelReason
		}
		t, err := tx.GetThread(r.ThreadID)
		if err != nil {
			return nil // the thread was deleted meanwhile
		}
		if hot && (status == "rollback" || len(cps) > 0 || r.Temporary) {
			return errNotHot
		}
		if t.Active == r.RunID {
			t.Active = ""
		}
		now := e.now()
		if status == "rollback" {
			if err := deleteLG(tx, r.ThreadID, r.RunID); err != nil {
				return err
			}
			if err := tx.DeleteRun(r.ThreadID, r.RunID); err != nil {
				return err
			}
		} else {
			for _, cp := range cps {
				if _, err := writeCheckpoint(tx, t, cp.values, cp.source, cp.step, cp.writes, cp.interrupts); err != nil {
					return err
				}
			}
			if cur == nil {
				cur = r
			}
			cur.Status, cur.UpdatedAt = status, now
			if runErr != nil && status != RunInterrupted {
				cur.Error = runErr.Error()
				cur.Failure = runFailure(status, runErr)
			}
			if err := tx.PutRun(cur); err != nil {
				return err
			}
		}
		// A finished run's interrupts are the thread's open questions; any
		// later successful run answered (or dropped) them.
		var open []any
		halted := false
		if status == RunSuccess && len(cps) > 0 {
			open = cps[len(cps)-1].interrupts
		}
		switch {
		case outcome != nil && status == RunSuccess:
			t.Values = outcome.Values
			t.Interrupts = outcome.interruptsByTask()
			open = outcome.Interrupts
			// A graph that stopped with nodes still to run (interrupt_before
			// or interrupt_after) waits for the client, as the reference
			// servers show it: the thread is interrupted.
			halted = len(outcome.Next) > 0
		case outcome != nil && outcome.Values != nil && status != "rollback":
			// A rollback requested after an interrupt: the run's
			// checkpoints go, and the values read back with them.
			t.Values = outcome.Values
		case status == RunSuccess:
			t.Interrupts = map[string]any{}
			if len(open) > 0 {
				t.Interrupts[r.RunID] = open
			}
		}
		ended = outcomeOf(status, len(open) > 0 || halted)
		switch {
		case t.busy():
			t.Status = ThreadBusy
		case len(open) > 0, halted:
			t.Status = ThreadInterrupted
		case status == RunError || status == RunTimeout:
			t.Status = ThreadError
		case status == RunInterrupted:
			t.Status = ThreadInterrupted
		default:
			t.Status = ThreadIdle
		}
		t.Error = threadError(status, runErr, reason)
		t.UpdatedAt = now
		if r.Temporary && !t.busy() {
			return deleteThreadData(tx, r.ThreadID)
		}
		return tx.PutThread(t)
	}
	// Either way the run's checkpoint writes are journaled no more.
	err := e.store.UpdateThread(context.Background(), r.ThreadID, true, func(tx Tx) error { return end(tx, true) })
	if errors.Is(err, errNotHot) {
		e.store.CloseFence(r.ThreadID)
		err = e.store.Update(context.Background(), func(tx Tx) error { return end(tx, false) })
	}
	if errors.Is(err, errClaimLost) {
		return "", true
	}
	if err != nil {
		e.Log.Error().Err(err).Str("run_id", r.RunID).Msg("record the end of a run")
	}
	return ended, false
}
