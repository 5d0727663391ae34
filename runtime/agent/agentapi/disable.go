package agentapi

import (
	"net/http"
	"slices"
	"strings"

	"slipway/server/httpx"
)

// routeGroup names the group of the agent API a path belongs to, as the
// reference's http.disable_* keys group its routes: "" for /ok and any
// path the API does not serve. A thread's runs and crons are "runs".
func routeGroup(path string) string {
	seg := strings.Split(strings.Trim(path, "/"), "/")
	switch seg[0] {
	case "assistants", "store", "ui":
		return seg[0]
	case "runs":
		return "runs"
	case "threads":
		if len(seg) >= 3 && seg[2] == "runs" {
			return "runs"
		}
		return "threads"
	case "info", "docs", "openapi.json", "metrics":
		return "meta"
	}
	return ""
}

// withoutDisabled answers the API's 404 for the route groups a.Disabled
// turns off, and serves the rest with api.
func (a *API) withoutDisabled(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g := routeGroup(r.URL.Path); g != "" && slices.Contains(a.Disabled, g) {
			httpx.WriteJSON(w, http.StatusNotFound, map[string]any{"detail": "Not Found"})
			return
		}
		api.ServeHTTP(w, r)
	})
}
