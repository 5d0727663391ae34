package agentapi

import (
	"cmp"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"slipway/runtime/agent"
	"slipway/server/httpx"
)

// RunsCancel is the body of POST /runs/cancel: the runs run_ids of thread
// thread_id, or every run of a status (pending, running or all).
type RunsCancel struct {
	ThreadID string   `json:"thread_id"`
	RunIDs   []string `json:"run_ids"`
	Status   string   `json:"status"`
}

// cancelRuns: POST /runs/cancel?action=interrupt|rollback with
// {"thread_id", "run_ids"} or {"status": "pending"|"running"|"all"}, the
// SDKs' runs.cancelMany / cancel_many. It answers 204 once every run is
// cancelled as POST .../runs/{id}/cancel does (running ones recorded
// interrupted); 404 when none could be.
func (a *API) cancelRuns(w http.ResponseWriter, r *http.Request) error {
	var body RunsCancel
	if err := decode(r, &body); err != nil {
		return err
	}
	action := r.URL.Query().Get("action")
	if err := oneOf(action, "action", agent.StrategyInterrupt, agent.StrategyRollback); err != nil {
		return err
	}
	// In the reference's words (its thread error shows them).
	reason := cmp.Or(action, agent.StrategyInterrupt) + " requested via POST /runs/cancel"
	status := strings.ToLower(body.Status)
	if status != "" {
		if err := oneOf(status, "status", agent.CancelPending, agent.CancelRunning, agent.CancelAll); err != nil {
			return err
		}
		if body.ThreadID != "" || body.RunIDs != nil {
			return httpx.Unprocessable("when providing a 'status', 'thread_id' and 'run_ids' must be omitted")
		}
		return noContent(w, a.Engine.CancelMany(r.Context(), "", nil, status, action, reason))
	}
	if body.ThreadID == "" || len(body.RunIDs) == 0 {
		return httpx.Unprocessable("must provide either a status, or both 'thread_id' and 'run_ids'")
	}
	thread, err := threadID(httprouter.Params{{Key: "thread_id", Value: body.ThreadID}})
	if err != nil {
		return err
	}
	ids := make([]string, len(body.RunIDs))
	for i, id := range body.RunIDs {
		if ids[i], err = runID(httprouter.Params{{Key: "run_id", Value: id}}); err != nil {
			return err
		}
	}
	return noContent(w, a.Engine.CancelMany(r.Context(), thread, ids, "", action, reason))
}
