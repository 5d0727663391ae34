package agentapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"slipway/runtime/agent"
	"slipway/server/httpx"
)

func (a *API) runRoutes(rt *httpx.Router, h func(httpx.Handle) httprouter.Handle) {
	// Stateless runs: /runs, /runs/stream, /runs/wait.
	rt.POST("/runs", h(func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
		return a.createRun(w, r, "", "")
	}))
	rt.POST("/runs/:action", h(func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		if ps.ByName("action") == "batch" {
			return a.batchRuns(w, r)
		}
		return a.createRun(w, r, "", ps.ByName("action"))
	}))
	rt.POST("/threads/:thread_id/runs", h(func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		id, err := threadID(ps)
		if err != nil {
			return err
		}
		return a.createRun(w, r, id, "")
	}))
	rt.GET("/threads/:thread_id/runs", h(a.listRuns))
	// /runs/stream and /runs/wait share the position of :run_id.
	rt.POST("/threads/:thread_id/runs/:run_id", h(func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		id, err := threadID(ps)
		if err != nil {
			return err
		}
		return a.createRun(w, r, id, ps.ByName("run_id"))
	}))
	rt.GET("/threads/:thread_id/runs/:run_id", h(a.getRun))
	rt.DELETE("/threads/:thread_id/runs/:run_id", h(a.deleteRun))
	rt.GET("/threads/:thread_id/runs/:run_id/join", h(a.joinRun))
	rt.GET("/threads/:thread_id/runs/:run_id/stream", h(a.joinStream))
	rt.POST("/threads/:thread_id/runs/:run_id/cancel", h(a.cancelRun))
}

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
	run, events, err := a.Engine.CreateRun(thread, rc)
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
		return a.wait(w, r, run, events, rc.OnDisconnect == "cancel")
	}
	httpx.WriteJSON(w, http.StatusOK, run)
	return nil
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
		return httpx.Errorf(http.StatusUnprocessableEntity, "the body must be a non-empty list of run requests")
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
		run, _, err := a.Engine.CreateRun("", rc)
		if err != nil {
			// Earlier items already run: say which one failed.
			return fmt.Errorf("run request %d: %w", i, err)
		}
		runs = append(runs, run)
	}
	httpx.WriteJSON(w, http.StatusOK, runs)
	return nil
}

// wait answers with the run's final values; a failed run still answers 200
// with {"__error__": {error, message}}, as the reference server does.
func (a *API) wait(w http.ResponseWriter, r *http.Request, run agent.Run, log *agent.EventLog, cancelOnDisconnect bool) error {
	var last json.RawMessage
	var failure map[string]any
	after := 0
	for log != nil {
		evs, done, err := log.Next(r.Context(), after)
		if err != nil {
			if cancelOnDisconnect {
				_ = a.Engine.Cancel(context.Background(), run.ThreadID, run.RunID, agent.StrategyInterrupt, false)
			}
			return nil
		}
		if done {
			break
		}
		for _, ev := range evs {
			after = ev.ID
			switch ev.Event {
			case "values":
				last = ev.Data
			case "error":
				_ = json.Unmarshal(ev.Data, &failure)
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case failure != nil:
		httpx.WriteJSON(w, http.StatusOK, map[string]any{"__error__": failure})
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

func (a *API) ids(ps httprouter.Params) (string, string, error) {
	t, err := threadID(ps)
	if err != nil {
		return "", "", err
	}
	rid, err := runID(ps)
	return t, rid, err
}

func (a *API) getRun(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	t, rid, err := a.ids(ps)
	if err != nil {
		return err
	}
	run, err := a.Engine.GetRun(t, rid)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, run)
	return nil
}

func (a *API) listRuns(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	t, err := threadID(ps)
	if err != nil {
		return err
	}
	limit, err := intParam(r, "limit", 10, 1, 1000)
	if err != nil {
		return err
	}
	offset, err := intParam(r, "offset", 0, 0, 1<<30)
	if err != nil {
		return err
	}
	status := r.URL.Query().Get("status")
	if err := oneOf(status, "status", agent.RunPending, agent.RunRunning, agent.RunSuccess, agent.RunError, agent.RunTimeout, agent.RunInterrupted); err != nil {
		return err
	}
	runs, err := a.Engine.ListRuns(t, limit, offset, status)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, runs)
	return nil
}

func (a *API) deleteRun(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	t, rid, err := a.ids(ps)
	if err != nil {
		return err
	}
	if err := a.Engine.DeleteRun(t, rid); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) joinRun(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	t, rid, err := a.ids(ps)
	if err != nil {
		return err
	}
	values, err := a.Engine.Join(r.Context(), t, rid)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, values)
	return nil
}

func (a *API) cancelRun(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	t, rid, err := a.ids(ps)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	action := q.Get("action")
	if err := oneOf(action, "action", agent.StrategyInterrupt, agent.StrategyRollback); err != nil {
		return err
	}
	wait := q.Get("wait") == "1" || strings.EqualFold(q.Get("wait"), "true")
	if err := a.Engine.Cancel(r.Context(), t, rid, action, wait); err != nil {
		return err
	}
	if wait {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	w.WriteHeader(http.StatusAccepted)
	return nil
}
