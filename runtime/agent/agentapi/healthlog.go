package agentapi

import (
	"net/http"
	"strconv"
)

// healthCheck names the requests the agent's access log leaves out: the
// GET /ok probes Slipway's health watcher sends every few seconds, which
// were most of an idle agent's output. The control plane counts them in
// the deployment's health.checks instead. The same goes for the GET
// /metrics reads of the control plane's charts (every
// SLIPWAY_CHART_INTERVAL) and scrapes. SLIPWAY_LOG_HEALTH_CHECKS=true (in
// the deployment's environment) logs them again.
func healthCheck(getenv func(string) string) func(*http.Request) bool {
	if on, _ := strconv.ParseBool(getenv("SLIPWAY_LOG_HEALTH_CHECKS")); on {
		return nil
	}
	return func(r *http.Request) bool {
		return (r.Method == http.MethodGet || r.Method == http.MethodHead) && (r.URL.Path == "/ok" || r.URL.Path == "/metrics")
	}
}
