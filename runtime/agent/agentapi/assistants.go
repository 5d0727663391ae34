package agentapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/julienschmidt/httprouter"

	"slipway/runtime/agent"
	"slipway/server/httpx"
)

// assistantVersions: POST /assistants/{id}/versions {metadata, limit, offset}.
func (a *API) assistantVersions(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	var b struct {
		Metadata map[string]any `json:"metadata"`
		page
	}
	if err := decodePage(r, &b, &b.page, 10); err != nil {
		return err
	}
	return reply(w)(versionsOut(a.Engine.AssistantVersions(ps.ByName("assistant_id"), b.Metadata, b.Limit, b.Offset)))
}

// setLatestVersion: POST /assistants/{id}/latest {version}.
func (a *API) setLatestVersion(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	var b struct {
		Version *int `json:"version"`
	}
	if err := decode(r, &b); err != nil {
		return err
	}
	if b.Version == nil || *b.Version < 1 {
		return httpx.Unprocessable("version is required and must be at least 1")
	}
	return reply(w)(a.Engine.SetLatestVersion(ps.ByName("assistant_id"), *b.Version))
}

type assistantBody struct {
	AssistantID string         `json:"assistant_id"`
	GraphID     string         `json:"graph_id"`
	Name        string         `json:"name"`
	Description *string        `json:"description"`
	Config      map[string]any `json:"config"`
	Context     map[string]any `json:"context"`
	Metadata    map[string]any `json:"metadata"`
	IfExists    string         `json:"if_exists"`
}

func (b assistantBody) assistant() agent.Assistant {
	return agent.Assistant{AssistantID: b.AssistantID, GraphID: b.GraphID, Name: b.Name, Description: b.Description,
		Config: b.Config, Context: b.Context, Metadata: b.Metadata}
}

func (a *API) createAssistant(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	var b assistantBody
	if err := decode(r, &b); err != nil {
		return err
	}
	if b.GraphID == "" {
		return httpx.Unprocessable("graph_id is required")
	}
	if err := oneOf(b.IfExists, "if_exists", "raise", "do_nothing"); err != nil {
		return err
	}
	return reply(w)(a.Engine.CreateAssistant(b.assistant(), b.IfExists))
}

func (a *API) getAssistant(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	return reply(w)(a.Engine.GetAssistant(ps.ByName("assistant_id")))
}

func (a *API) patchAssistant(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	var b assistantBody
	if err := decode(r, &b); err != nil {
		return err
	}
	return reply(w)(a.Engine.PatchAssistant(ps.ByName("assistant_id"), b.assistant()))
}

func (a *API) deleteAssistant(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	return noContent(w, a.Engine.DeleteAssistant(ps.ByName("assistant_id")))
}

func (a *API) searchAssistants(w http.ResponseWriter, r *http.Request, count bool) error {
	var b struct {
		GraphID   string         `json:"graph_id"`
		Name      string         `json:"name"`
		Metadata  map[string]any `json:"metadata"`
		SortBy    string         `json:"sort_by"`
		SortOrder string         `json:"sort_order"`
		page
	}
	if err := decodePage(r, &b, &b.page, 10); err != nil {
		return err
	}
	if err := oneOf(b.SortBy, "sort_by", "assistant_id", "graph_id", "name", "created_at", "updated_at"); err != nil {
		return err
	}
	if err := oneOf(b.SortOrder, "sort_order", "asc", "desc"); err != nil {
		return err
	}
	q := agent.AssistantQuery{GraphID: b.GraphID, Name: b.Name, Metadata: b.Metadata,
		Limit: b.Limit, Offset: b.Offset, SortBy: b.SortBy, Desc: b.SortOrder != "asc"}
	if count {
		n, err := a.Engine.CountAssistants(q)
		return replyCount[agent.Assistant](w, true, nil, n, err)
	}
	list, err := a.Engine.FindAssistants(q)
	return replyCount(w, false, list, 0, err)
}

// assistantGraph describes the graph's nodes: a language host's graph as
// its host draws it (xray: true, false or a depth of subgraphs to
// expand); a built-in graph as input → the graph → end.
func (a *API) assistantGraph(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	as, err := a.Engine.GetAssistant(ps.ByName("assistant_id"))
	if err != nil {
		return err
	}
	var xray any
	switch v := r.URL.Query().Get("xray"); v {
	case "", "false", "0":
	case "true":
		xray = true
	default:
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return httpx.Unprocessable("xray must be true, false or a non-negative integer")
		}
		xray = n
	}
	if out, ok, err := a.Engine.Describe(as.GraphID, "graph", as.Config, map[string]any{"xray": xray}); ok {
		return writeRaw(w, out, err)
	}
	return reply(w)(map[string]any{
		"nodes": []any{map[string]any{"id": "__start__"}, map[string]any{"id": as.GraphID}, map[string]any{"id": "__end__"}},
		"edges": []any{map[string]any{"source": "__start__", "target": as.GraphID}, map[string]any{"source": as.GraphID, "target": "__end__"}},
	}, nil)
}

func (a *API) assistantSchemas(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	as, err := a.Engine.GetAssistant(ps.ByName("assistant_id"))
	if err != nil {
		return err
	}
	if out, ok, err := a.Engine.Describe(as.GraphID, "schemas", as.Config, nil); ok {
		return writeRaw(w, out, err)
	}
	state := map[string]any{"type": "object", "properties": map[string]any{"messages": map[string]any{"type": "array"}}}
	return reply(w)(map[string]any{"graph_id": as.GraphID, "input_schema": state, "output_schema": state,
		"state_schema": state, "config_schema": map[string]any{"type": "object"}, "context_schema": map[string]any{"type": "object"}}, nil)
}

// assistantSubgraphs: GET /assistants/{id}/subgraphs[/{namespace}]?recurse,
// the schemas of the graph's subgraphs by namespace (none for built-in graphs).
func (a *API) assistantSubgraphs(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	as, err := a.Engine.GetAssistant(ps.ByName("assistant_id"))
	if err != nil {
		return err
	}
	recurse, err := httpx.QueryBool(r.URL.Query(), "recurse")
	if err != nil {
		return err
	}
	p := map[string]any{"namespace": ps.ByName("namespace"), "recurse": recurse}
	if out, ok, err := a.Engine.Describe(as.GraphID, "subgraphs", as.Config, p); ok {
		return writeRaw(w, out, err)
	}
	return reply(w)(map[string]any{}, nil)
}

// writeRaw answers with JSON a language host computed.
func writeRaw(w http.ResponseWriter, out json.RawMessage, err error) error {
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
	return nil
}
