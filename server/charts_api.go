package server

import (
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"slipway/server/apidoc"
	"slipway/server/auth"
	"slipway/server/httpx"
)

// chartWindows are the windows GET /v2/deployments/{id}/metrics serves.
var chartWindows = []string{"1h", "24h"}

// chartRoutes registers the charts' API: read like the deployment itself
// (any role of its workspace).
func (a *app) chartRoutes(rt *httpx.Router, prefix string) {
	rt.GET(prefix+"/v2/deployments/:id/metrics", auth.Require(a.orgs, true, a.deploymentMetrics))
}

// deploymentMetrics: GET /v2/deployments/{id}/metrics?window=1h|24h.
func (a *app) deploymentMetrics(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id, err := httpx.ParseID(ps.ByName("id"), "path", "deployment_id")
	if err != nil {
		return err
	}
	window := "1h"
	if q := r.URL.Query(); q.Has("window") {
		window = q.Get("window")
	}
	if window != chartWindows[0] && window != chartWindows[1] {
		return httpx.Invalid("enum", "Input should be '1h' or '24h'", "query", "window")
	}
	if err := httpx.FromDomain(a.cp.CheckDeployment(auth.From(r).WorkspaceID, id)); err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, a.charts.series(id.String(), window, time.Now()))
	return nil
}

// chartsOpenAPI documents the charts' route.
func chartsOpenAPI() []apidoc.Op {
	return []apidoc.Op{{Method: "GET", Path: "/v2/deployments/:id/metrics", ID: "deployment_metrics", Tag: "Deployments",
		Security: apidoc.Workspace,
		Summary:  "A deployment's charts: runs, durations, pending runs, CPU and memory",
		Description: "Slipway's own endpoint, what the dashboard's charts draw: the time series Slipway keeps in memory per deployment, " +
			"read from its agent every SLIPWAY_CHART_INTERVAL (10 s). `1h` is the last hour at that interval, `24h` the last day in 5-minute buckets " +
			"(the last one still filling). The series start empty when Slipway starts; a point is null where the agent could not be read.",
		Query: []apidoc.Param{{Name: "window", Description: "1h (default) or 24h.",
			Schema: apidoc.Schema{"type": "string", "enum": []any{"1h", "24h"}, "default": "1h"}}},
		Responses: []apidoc.Resp{{Status: 200, Body: ChartSeries{}}}}}
}
