package server

import (
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"slipway/server/apidoc"
	"slipway/server/auth"
	"slipway/server/dashboard"
	"slipway/server/httpx"
)

// Every route of `serve`, in one place: each package's own table is in its
// routes.go (orgapi, controlplane) or Routes method (dashboard), registered
// here with what serve adds itself.

// register puts every route of `serve` on rt (the authorization tests read
// them back from rt) and returns the proxy to deployments.
func (a *app) register(rt *httpx.Router) *proxy {
	for _, prefix := range []string{"", "/api-host"} {
		a.orgs.Routes(rt, prefix)
		a.cp.Routes(rt, a.orgs, prefix)
		a.chartRoutes(rt, prefix)
		rt.GET(prefix+"/ok", a.ok)
		rt.GET(prefix+"/info", a.info)
	}
	a.dash = &dashboard.Dashboard{Auth: a.orgs, Keys: a.orgs, Audit: a.audit}
	a.dash.Routes(rt)
	docRoutes(rt, a.version)
	px := &proxy{cp: a.cp, driver: a.driver, gate: a.gate, handoverWait: 60 * time.Second,
		agentsOrigin: a.agentsURL != nil, log: a.log.With().Str("component", "proxy").Logger(), cors: a.cors,
		metrics: a.metrics}
	px.otel = a.otel
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"} {
		rt.Handle(m, "/agents/:name/*path", a.agentsOnDashboard(a.agentAPI(px)))
	}
	px.uiAssetRoutes(rt)
	return px
}

// docRoutes serves the document and its page.
func docRoutes(rt *httpx.Router, version string) {
	h := apidoc.NewHandlers(apiDoc(version), "/openapi.json")
	rt.GET("/openapi.json", func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) { h.JSON(w, r) })
	rt.GET("/docs", func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) { h.HTML(w, r) })
}

// agentAPI is a deployment's agent API as every route to it serves it
// (/agents/{name}/..., its custom_url's host, the agents origin): CORS,
// then a credential of the deployment's workspace, reads open to
// Viewers (auth.AgentAPI), then the proxy.
func (a *app) agentAPI(px *proxy) httprouter.Handle {
	return px.withCORS(auth.Guard(a.orgs, auth.Policy{Workspace: true, Access: auth.AgentAPI}, nil, px.serve))
}
