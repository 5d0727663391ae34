package agentapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"

	"github.com/google/uuid"
	"github.com/julienschmidt/httprouter"

	"slipway/runtime/agent"
	"slipway/server/httpx"
)

// Thread TTLs on the wire (agent/ttl.go has the rules): POST /threads and
// PATCH /threads/{id} take "ttl": {"ttl": minutes, "strategy":
// "delete"|"keep_latest"} as the SDKs send it (the Python SDK turns a bare
// number into that object), GET /threads/{id}?include=ttl shows it, and
// POST /threads/prune applies a strategy at once.

// maxTTL bounds a TTL's minutes (the engine's bound too): 100 years.
const maxTTL = 100 * 366 * 24 * 60

// parseTTL reads a request's "ttl" (absent or null: nil) as a field
// error at ["body", "ttl", ...].
func parseTTL(raw json.RawMessage) (*agent.ThreadTTL, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return nil, httpx.Invalid("dict_type", `ttl must be an object {"ttl": minutes, "strategy": "delete"|"keep_latest"}`, "body", "ttl")
	}
	out := agent.ThreadTTL{Strategy: agent.TTLDelete}
	if s, ok := m["strategy"]; ok && string(s) != "null" {
		if json.Unmarshal(s, &out.Strategy) != nil || out.Strategy != agent.TTLDelete && out.Strategy != agent.TTLKeepLatest {
			return nil, httpx.Invalid("literal_error", `ttl.strategy must be "delete" or "keep_latest"`, "body", "ttl", "strategy")
		}
	}
	v, ok := m["ttl"]
	if !ok || string(v) == "null" {
		return nil, httpx.Invalid("missing", "ttl.ttl (minutes) is required", "body", "ttl", "ttl")
	}
	if json.Unmarshal(v, &out.Minutes) != nil || math.IsNaN(out.Minutes) {
		return nil, httpx.Invalid("float_type", "ttl.ttl must be a number of minutes", "body", "ttl", "ttl")
	}
	if out.Minutes <= 0 || out.Minutes > maxTTL {
		return nil, httpx.Invalid("value_error", fmt.Sprintf("ttl.ttl must be above 0 and at most %d minutes", maxTTL), "body", "ttl", "ttl")
	}
	return &out, nil
}

// threadWithTTL is a thread as GET ?include=ttl answers it.
type threadWithTTL struct {
	agent.Thread
	TTL *agent.ThreadTTLInfo `json:"ttl,omitempty"`
}

// includes reports whether the include query parameter (comma-separated,
// possibly repeated) names field.
func includes(r *http.Request, field string) bool {
	for _, v := range r.URL.Query()["include"] {
		for _, f := range strings.Split(v, ",") {
			if strings.TrimSpace(f) == field {
				return true
			}
		}
	}
	return false
}

// pruneOr serves POST /threads/prune and passes other POST
// /threads/{name} requests to next (search, count).
func (a *API) pruneOr(next httpx.Handle) httpx.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		if ps.ByName("thread_id") == "prune" {
			return a.pruneThreads(w, r)
		}
		return next(w, r, ps)
	}
}

// ThreadPrune is the body of POST /threads/prune.
type ThreadPrune struct {
	ThreadIDs []string `json:"thread_ids"`
	Strategy  string   `json:"strategy"`
}

// PruneResult is the answer of POST /threads/prune.
type PruneResult struct {
	PrunedCount int `json:"pruned_count"`
}

func (a *API) pruneThreads(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		ThreadIDs *[]string `json:"thread_ids"`
		Strategy  *string   `json:"strategy"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	if body.ThreadIDs == nil {
		return httpx.Invalid("missing", "thread_ids is required", "body", "thread_ids")
	}
	strategy := agent.TTLDelete
	if body.Strategy != nil {
		strategy = *body.Strategy
	}
	if strategy != agent.TTLDelete && strategy != agent.TTLKeepLatest {
		return httpx.Invalid("literal_error", fmt.Sprintf("Invalid strategy: %s. Expected 'delete' or 'keep_latest'.", strategy), "body", "strategy")
	}
	ids := make([]string, 0, len(*body.ThreadIDs))
	for i, id := range *body.ThreadIDs {
		if _, err := uuid.Parse(id); err != nil {
			return httpx.Invalid("uuid_parsing", "Invalid thread ID: must be a UUID", "body", "thread_ids", i)
		}
		ids = append(ids, strings.ToLower(id))
	}
	n, err := a.Engine.PruneThreads(ids, strategy)
	return reply(w)(PruneResult{PrunedCount: n}, err)
}
