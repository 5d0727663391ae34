package agentapi

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"slipway/runtime/agent"
	"slipway/server/httpx"
)

// createRun handles POST /[threads/{id}/]runs[/stream|/wait].
func (a *API) createRun(w http.ResponseWriter, r *http.Request, thread, action string) error {
	switch action {
	case "", "stream", "wait":
	default:
		return httpx.NotFound("Not Found")
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return httpx.JSONError(err)
	}
	rc, err := DecodeRunCreate(body)
	if err != nil {
		return err
	}
	run, events, err := a.Engine.CreateRunIn(r.Context(), thread, rc)
	if err != nil {
		return err
	}
	loc := "/threads/" + run.ThreadID + "/runs/" + run.RunID
	if thread == "" {
		loc = "/runs/" + run.RunID
	}
	w.Header().Set("Content-Location", loc)
	switch action {
	case "stream":
		if rc.StreamResumable {
			w.Header().Set("Location", "/threads/"+run.ThreadID+"/runs/"+run.RunID+"/stream")
		}
		return a.stream(w, r, run, events, rc.StreamMode, 0, rc.OnDisconnect == "cancel")
	case "wait":
		// Where the result can be had again, as the reference says.
		w.Header().Set("Location", "/threads/"+run.ThreadID+"/runs/"+run.RunID+"/join")
		return a.wait(w, r, run, events, rc.OnDisconnect == "cancel")
	}
	return reply(w)(run, nil)
}

// batchRuns: POST /runs/batch, a list of stateless run requests. Every
// request is validated before any run is created, so a bad item creates
// nothing.
func (a *API) batchRuns(w http.ResponseWriter, r *http.Request) error {
	var items []json.RawMessage
	if err := decode(r, &items); err != nil {
		return err
	}
	if len(items) == 0 {
		return httpx.Unprocessable("the body must be a non-empty list of run requests")
	}
	reqs := make([]agent.RunCreate, len(items))
	for i, raw := range items {
		rc, err := decodeRunCreate(raw)
		if err != nil {
			var he *httpx.Error
			if errors.As(err, &he) {
				return httpx.Errorf(he.Status, "run request %d: %s", i, he.Detail)
			}
			return err
		}
		reqs[i] = rc
	}
	runs := make([]agent.Run, 0, len(reqs))
	for i, rc := range reqs {
		run, _, err := a.Engine.CreateRunIn(r.Context(), "", rc)
		if err != nil {
			// Earlier items already run: say which one failed.
			return fmt.Errorf("run request %d: %w", i, err)
		}
		runs = append(runs, run)
	}
	return reply(w)(runs, nil)
}

// wait answers with the run's final values; a failed run still answers 200
// with {"__error__": {error, message}}, as the reference server does.
func (a *API) wait(w http.ResponseWriter, r *http.Request, run agent.Run, log *agent.EventLog, cancelOnDisconnect bool) error {
	var last, interrupted json.RawMessage
	var failure map[string]any
	w.Header().Set("Content-Type", "application/json")
	stopBeats := a.heartbeat(w)
	followed := a.follow(r, run, log, 0, cancelOnDisconnect, func(evs []agent.StreamEvent) bool {
		for _, ev := range evs {
			switch ev.Event {
			case "values":
				last = ev.Data
				if interruptedValues(ev.Data) {
					interrupted = ev.Data
				}
			case "error":
				_ = json.Unmarshal(ev.Data, &failure)
			}
		}
		return true
	})
	stopBeats()
	if !followed {
		return nil
	}
	switch {
	case failure != nil:
		httpx.WriteJSON(w, http.StatusOK, map[string]any{"__error__": failure})
	case interrupted != nil && a.answersInterrupt(run):
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(interrupted)
	case last != nil:
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(last)
	default:
		st, err := a.Engine.GetState(run.ThreadID, "")
		if err != nil {
			httpx.WriteJSON(w, http.StatusOK, map[string]any{})
			return nil
		}
		httpx.WriteJSON(w, http.StatusOK, st.Values)
	}
	return nil
}

// heartbeat writes a newline to w every WaitHeartbeat until the returned
// stop is called, which returns once no write is under way. The first one
// commits the status (200): what follows is the body, errors included, as
// on the reference servers.
func (a *API) heartbeat(w http.ResponseWriter) (stop func()) {
	every := a.WaitHeartbeat
	if every <= 0 {
		every = 5 * time.Second
	}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(every)
		defer t.Stop()
		rc := http.NewResponseController(w)
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if _, err := w.Write([]byte("\n")); err != nil {
					return
				}
				_ = rc.Flush()
			}
		}
	}()
	return func() { close(done); <-exited }
}

func (a *API) getRun(w http.ResponseWriter, _ *http.Request, t, rid string) error {
	return reply(w)(a.Engine.GetRun(t, rid))
}

func (a *API) listRuns(w http.ResponseWriter, r *http.Request, _ httprouter.Params, t string) error {
	q := r.URL.Query()
	limit, offset, err := httpx.LimitOffset(q, 10, maxLimit)
	if err != nil {
		return err
	}
	status := q.Get("status")
	if err := oneOf(status, "status", agent.RunPending, agent.RunRunning, agent.RunSuccess, agent.RunError, agent.RunTimeout, agent.RunInterrupted); err != nil {
		return err
	}
	return reply(w)(a.Engine.ListRuns(t, limit, offset, status))
}

func (a *API) deleteRun(w http.ResponseWriter, _ *http.Request, t, rid string) error {
	return noContent(w, a.Engine.DeleteRun(t, rid))
}

// joinRun waits for a run to end. A run still live answers as /wait does,
// from its events, as the reference server's join reads the run's stream:
// its last values (or, on the Python host, the values carrying its
// interrupt), {"__error__": …} for a failed run, newlines meanwhile. A
// run already ended answers from its thread (Engine.JoinEnded).
func (a *API) joinRun(w http.ResponseWriter, r *http.Request, t, rid string) error {
	run, err := a.Engine.GetRun(t, rid)
	if err != nil {
		return err
	}
	if log := a.Engine.Subscribe(rid); log != nil {
		cancel := r.URL.Query().Get("cancel_on_disconnect")
		return a.wait(w, r, run, log, cancel == "1" || strings.EqualFold(cancel, "true"))
	}
	return reply(w)(a.Engine.JoinEnded(r.Context(), t, rid))
}

func (a *API) cancelRun(w http.ResponseWriter, r *http.Request, t, rid string) error {
	q := r.URL.Query()
	action := q.Get("action")
	if err := oneOf(action, "action", agent.StrategyInterrupt, agent.StrategyRollback); err != nil {
		return err
	}
	wait := q.Get("wait") == "1" || strings.EqualFold(q.Get("wait"), "true")
	// In the reference's words (its thread error shows them).
	reason := cmp.Or(action, agent.StrategyInterrupt) + " requested via POST /threads/{thread_id}/runs/{run_id}/cancel"
	if err := a.Engine.Cancel(r.Context(), t, rid, action, reason, wait); err != nil {
		return err
	}
	if wait {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	w.WriteHeader(http.StatusAccepted)
	return nil
}
