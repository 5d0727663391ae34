package agentapi

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"slipway/runtime/agent"
	"slipway/server/httpx"
)

func (a *API) threadRoutes(rt *httpx.Router, h func(httpx.Handle) httprouter.Handle) {
	rt.POST("/threads", h(a.createThread))
	// httprouter cannot hold /threads/search beside /threads/:thread_id, so
	// the static names dispatch on the wildcard's value.
	rt.POST("/threads/:thread_id", h(func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		switch ps.ByName("thread_id") {
		case "search":
			return a.searchThreads(w, r, false)
		case "count":
			return a.searchThreads(w, r, true)
		}
		return httpx.Errorf(http.StatusMethodNotAllowed, "Method Not Allowed")
	}))
	rt.GET("/threads/:thread_id", h(a.getThread))
	rt.PATCH("/threads/:thread_id", h(a.patchThread))
	rt.DELETE("/threads/:thread_id", h(a.deleteThread))
	rt.GET("/threads/:thread_id/state", h(a.getState))
	rt.GET("/threads/:thread_id/state/:checkpoint_id", h(a.getState))
	rt.POST("/threads/:thread_id/state", h(a.updateState))
	// The SDK asks for a state by checkpoint object at .../state/checkpoint.
	rt.POST("/threads/:thread_id/state/:checkpoint_id", h(a.stateAtCheckpoint))
	rt.GET("/threads/:thread_id/history", h(a.history))
	rt.POST("/threads/:thread_id/history", h(a.history))
	rt.POST("/threads/:thread_id/copy", h(a.copyThread))
}

func (a *API) createThread(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	var body struct {
		ThreadID string         `json:"thread_id"`
		Metadata map[string]any `json:"metadata"`
		IfExists string         `json:"if_exists"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	if err := oneOf(body.IfExists, "if_exists", "raise", "do_nothing"); err != nil {
		return err
	}
	if body.ThreadID != "" {
		id, err := threadID(httprouter.Params{{Key: "thread_id", Value: body.ThreadID}})
		if err != nil {
			return err
		}
		body.ThreadID = id
	}
	t, err := a.Engine.CreateThread(body.ThreadID, body.Metadata, body.IfExists)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, t)
	return nil
}

func (a *API) getThread(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id, err := threadID(ps)
	if err != nil {
		return err
	}
	t, err := a.Engine.GetThread(id)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, t)
	return nil
}

func (a *API) patchThread(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id, err := threadID(ps)
	if err != nil {
		return err
	}
	var body struct {
		Metadata map[string]any `json:"metadata"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	t, err := a.Engine.PatchThread(id, body.Metadata)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, t)
	return nil
}

func (a *API) deleteThread(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id, err := threadID(ps)
	if err != nil {
		return err
	}
	if err := a.Engine.DeleteThread(id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) searchThreads(w http.ResponseWriter, r *http.Request, count bool) error {
	var body struct {
		IDs       []string       `json:"ids"`
		Metadata  map[string]any `json:"metadata"`
		Values    map[string]any `json:"values"`
		Status    string         `json:"status"`
		Limit     int            `json:"limit"`
		Offset    int            `json:"offset"`
		SortBy    string         `json:"sort_by"`
		SortOrder string         `json:"sort_order"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	if err := limitOffset(&body.Limit, &body.Offset, 10); err != nil {
		return err
	}
	if err := oneOf(body.Status, "status", agent.ThreadIdle, agent.ThreadBusy, agent.ThreadInterrupted, agent.ThreadError); err != nil {
		return err
	}
	if err := oneOf(body.SortBy, "sort_by", "thread_id", "status", "created_at", "updated_at"); err != nil {
		return err
	}
	if err := oneOf(body.SortOrder, "sort_order", "asc", "desc"); err != nil {
		return err
	}
	f := agent.ThreadFilter{IDs: body.IDs, Metadata: body.Metadata, Values: body.Values, Status: body.Status,
		Limit: body.Limit, Offset: body.Offset, SortBy: body.SortBy, Desc: body.SortOrder != "asc"}
	if count {
		f.Limit, f.Offset = 0, 0
	}
	ts, n, err := a.Engine.SearchThreads(f)
	if err != nil {
		return err
	}
	if count {
		httpx.WriteJSON(w, http.StatusOK, n)
		return nil
	}
	if ts == nil {
		ts = []agent.Thread{}
	}
	httpx.WriteJSON(w, http.StatusOK, ts)
	return nil
}

func (a *API) getState(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id, err := threadID(ps)
	if err != nil {
		return err
	}
	sub, err := boolParam(r, "subgraphs")
	if err != nil {
		return err
	}
	st, err := a.Engine.GetStateQuery(id, agent.StateQuery{CheckpointID: ps.ByName("checkpoint_id"), Subgraphs: sub})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, st)
	return nil
}

// stateAtCheckpoint: POST /threads/{id}/state/checkpoint with
// {"checkpoint": {"checkpoint_id", "checkpoint_ns"}, "subgraphs"}: a
// checkpoint_ns alone names a subgraph's latest state.
func (a *API) stateAtCheckpoint(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	if ps.ByName("checkpoint_id") != "checkpoint" {
		return httpx.Errorf(http.StatusMethodNotAllowed, "Method Not Allowed")
	}
	id, err := threadID(ps)
	if err != nil {
		return err
	}
	var body struct {
		Checkpoint agent.CheckpointRef `json:"checkpoint"`
		Subgraphs  bool                `json:"subgraphs"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	st, err := a.Engine.GetStateQuery(id, agent.StateQuery{CheckpointID: body.Checkpoint.CheckpointID,
		NS: body.Checkpoint.CheckpointNS, Subgraphs: body.Subgraphs})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, st)
	return nil
}

func (a *API) updateState(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id, err := threadID(ps)
	if err != nil {
		return err
	}
	var body struct {
		Values       map[string]any      `json:"values"`
		AsNode       string              `json:"as_node"`
		CheckpointID string              `json:"checkpoint_id"`
		Checkpoint   agent.CheckpointRef `json:"checkpoint"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	// checkpoint_id (or a checkpoint object) updates an earlier state: a fork.
	at := body.Checkpoint
	if body.CheckpointID != "" {
		at.CheckpointID = body.CheckpointID
	}
	ref, err := a.Engine.UpdateStateAt(id, body.Values, body.AsNode, at)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"checkpoint": ref})
	return nil
}

func (a *API) history(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id, err := threadID(ps)
	if err != nil {
		return err
	}
	var body struct {
		Limit      int                 `json:"limit"`
		Before     any                 `json:"before"`
		Metadata   map[string]any      `json:"metadata"`
		Filter     map[string]any      `json:"filter"`
		Checkpoint agent.CheckpointRef `json:"checkpoint"`
	}
	if r.Method == http.MethodPost {
		if err := decode(r, &body); err != nil {
			return err
		}
	} else if body.Limit, err = intParam(r, "limit", 10, 1, 1000); err != nil {
		return err
	}
	if body.Limit == 0 {
		body.Limit = 10
	}
	if body.Limit < 1 || body.Limit > 1000 {
		return httpx.Errorf(http.StatusUnprocessableEntity, "limit must be between 1 and 1000")
	}
	before := ""
	switch b := body.Before.(type) {
	case string:
		before = b
	case map[string]any:
		before, _ = b["checkpoint_id"].(string)
		if c, ok := b["configurable"].(map[string]any); ok && before == "" {
			before, _ = c["checkpoint_id"].(string)
		}
	}
	// The SDK sends the metadata filter as "metadata"; other clients as "filter".
	filter := body.Metadata
	if filter == nil {
		filter = body.Filter
	}
	h, err := a.Engine.HistoryQuery(id, agent.HistoryQuery{Limit: body.Limit, Before: before, Filter: filter,
		NS: body.Checkpoint.CheckpointNS, CheckpointID: body.Checkpoint.CheckpointID})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, h)
	return nil
}

func (a *API) copyThread(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id, err := threadID(ps)
	if err != nil {
		return err
	}
	t, err := a.Engine.CopyThread(id)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, t)
	return nil
}
