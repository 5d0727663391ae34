package agentapi

import (
	"net/http"

	"slipway/oteltrace"
	"slipway/server/httpx"
)

// traced gives every request h serves a server span named by the route
// pattern rt matched (README "Traces"). The span continues the caller's
// traceparent: only Slipway's proxy reaches an agent (RequireToken), and
// the proxy sends its own span's context, never a client's.
func (a *API) traced(h http.Handler, rt *httpx.Router) http.Handler {
	if a.Tracing == nil {
		return h
	}
	routes := rt.Routes()
	table := make([]oteltrace.Route, len(routes))
	for i, r := range routes {
		table[i] = oteltrace.Route{Method: r.Method, Path: r.Path}
	}
	return a.Tracing.Handler(h, oteltrace.NewRoutes(table), oteltrace.Continue)
}
