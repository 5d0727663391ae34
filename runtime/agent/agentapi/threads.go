package agentapi

import (
	"encoding/json"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"slipway/runtime/agent"
	"slipway/server/httpx"
)

// ThreadCreate is the body of POST /threads.
type ThreadCreate struct {
	ThreadID string         `json:"thread_id"`
	Metadata map[string]any `json:"metadata"`
	IfExists string         `json:"if_exists"`
	// Supersteps are state updates applied on creation, each one
	// checkpoint, by the graph metadata.graph_id names (see
	// agent.Engine.CreateThreadWithSupersteps).
	Supersteps []agent.Superstep `json:"supersteps"`
	// TTL is the thread's time-to-live (ttl.go); without it the
	// configured default applies.
	TTL json.RawMessage `json:"ttl,omitempty"`
}

func (a *API) createThread(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	var body ThreadCreate
	if err := decode(r, &body); err != nil {
		return err
	}
	if err := oneOf(body.IfExists, "if_exists", "raise", "do_nothing"); err != nil {
		return err
	}
	ttl, err := parseTTL(body.TTL)
	if err != nil {
		return err
	}
	if body.ThreadID != "" {
		id, err := threadID(httprouter.Params{{Key: "thread_id", Value: body.ThreadID}})
		if err != nil {
			return err
		}
		body.ThreadID = id
	}
	// The TTL (or the configured default) is set in the transaction
	// that creates the thread.
	return reply(w)(a.Engine.CreateThreadWithSupersteps(body.ThreadID, body.Metadata, body.IfExists, body.Supersteps, ttl))
}

func (a *API) getThread(w http.ResponseWriter, r *http.Request, _ httprouter.Params, id string) error {
	if !includes(r, "ttl") {
		return reply(w)(a.Engine.GetThread(id))
	}
	t, info, err := a.Engine.GetThreadTTL(id)
	return reply(w)(threadWithTTL{Thread: t, TTL: info}, err)
}

func (a *API) patchThread(w http.ResponseWriter, r *http.Request, _ httprouter.Params, id string) error {
	var body struct {
		Metadata map[string]any  `json:"metadata"`
		TTL      json.RawMessage `json:"ttl"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	ttl, err := parseTTL(body.TTL)
	if err != nil {
		return err
	}
	if ttl != nil {
		return reply(w)(a.Engine.PatchThreadTTL(id, body.Metadata, *ttl))
	}
	return reply(w)(a.Engine.PatchThread(id, body.Metadata))
}

func (a *API) deleteThread(w http.ResponseWriter, _ *http.Request, _ httprouter.Params, id string) error {
	return noContent(w, a.Engine.DeleteThread(id))
}

func (a *API) searchThreads(w http.ResponseWriter, r *http.Request, count bool) error {
	var body struct {
		IDs       []string       `json:"ids"`
		Metadata  map[string]any `json:"metadata"`
		Values    map[string]any `json:"values"`
		Status    string         `json:"status"`
		SortBy    string         `json:"sort_by"`
		SortOrder string         `json:"sort_order"`
		page
	}
	if err := decodePage(r, &body, &body.page, 10); err != nil {
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
		n, err := a.Engine.CountThreads(f)
		return replyCount[agent.Thread](w, true, nil, n, err)
	}
	ts, err := a.Engine.FindThreads(f)
	return replyCount(w, false, ts, 0, err)
}

func (a *API) getState(w http.ResponseWriter, r *http.Request, ps httprouter.Params, id string) error {
	sub, err := httpx.QueryBool(r.URL.Query(), "subgraphs")
	if err != nil {
		return err
	}
	return reply(w)(stateOut(a.Engine.GetStateQuery(id, agent.StateQuery{CheckpointID: ps.ByName("checkpoint_id"), Subgraphs: sub})))
}

// stateAtCheckpoint: POST /threads/{id}/state/checkpoint with
// {"checkpoint": {"checkpoint_id", "checkpoint_ns"}, "subgraphs"}: a
// checkpoint_ns alone names a subgraph's latest state.
func (a *API) stateAtCheckpoint(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	if ps.ByName("checkpoint_id") != "checkpoint" {
		return httpx.Errorf(http.StatusMethodNotAllowed, "Method Not Allowed")
	}
	return onThread(func(w http.ResponseWriter, r *http.Request, _ httprouter.Params, id string) error {
		var body struct {
			Checkpoint agent.CheckpointRef `json:"checkpoint"`
			Subgraphs  bool                `json:"subgraphs"`
		}
		if err := decode(r, &body); err != nil {
			return err
		}
		return reply(w)(stateOut(a.Engine.GetStateQuery(id, agent.StateQuery{CheckpointID: body.Checkpoint.CheckpointID,
			NS: body.Checkpoint.CheckpointNS, Subgraphs: body.Subgraphs})))
	})(w, r, ps)
}

func (a *API) updateState(w http.ResponseWriter, r *http.Request, _ httprouter.Params, id string) error {
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
	return reply(w)(map[string]any{"checkpoint": ref}, err)
}

// history: GET /threads/{id}/history?limit= or POST with a body
// {limit, before, metadata|filter, checkpoint}.
func (a *API) history(w http.ResponseWriter, r *http.Request, _ httprouter.Params, id string) error {
	var body struct {
		Limit      int                 `json:"limit"`
		Before     any                 `json:"before"`
		Metadata   map[string]any      `json:"metadata"`
		Filter     map[string]any      `json:"filter"`
		Checkpoint agent.CheckpointRef `json:"checkpoint"`
	}
	var err error
	if r.Method == http.MethodPost {
		err = decode(r, &body)
		if err == nil {
			err = checkLimit(&body.Limit, 10)
		}
	} else {
		body.Limit, err = httpx.QueryInt(r.URL.Query(), "limit", 10, 1, maxLimit)
	}
	if err != nil {
		return err
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
	return reply(w)(a.Engine.HistoryQuery(id, agent.HistoryQuery{Limit: body.Limit, Before: before, Filter: filter,
		NS: body.Checkpoint.CheckpointNS, CheckpointID: body.Checkpoint.CheckpointID}))
}

func (a *API) copyThread(w http.ResponseWriter, _ *http.Request, _ httprouter.Params, id string) error {
	return reply(w)(a.Engine.CopyThread(id))
}
