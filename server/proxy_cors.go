package server

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"slipway/server/cors"
)

// withCORS puts the server-wide cross-origin policy
// (SLIPWAY_CORS_ALLOW_ORIGINS) in front of the proxy's authentication, on
// every way to a deployment (/agents/{name}/..., the agents origin, a
// custom_url host). A preflight carries no credential, so it is answered
// here from the policy alone and never reaches authentication or the
// agent: it grants nothing, as the request it announces still needs an
// API key. An actual request from an allowed origin gets the grant on
// whatever answers it, a 401 included, so the page's script can read why
// it failed. Without a policy, nothing changes: no CORS at all.
func (p *proxy) withCORS(next httprouter.Handle) httprouter.Handle {
	if p.cors == nil {
		return next
	}
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if cors.IsPreflight(r) {
			p.cors.Preflight(w, r)
			return
		}
		if r.Header.Get("Origin") != "" {
			p.cors.Decorate(w.Header(), r)
		}
		next(w, r, ps)
	}
}

// stripAgentCORS drops the agent's own Access-Control-* headers when
// Slipway decorates the response itself: they would duplicate the grant
// (a browser refuses two Allow-Origin values) or widen it.
func (p *proxy) stripAgentCORS(h http.Header) {
	if p.cors != nil {
		cors.StripGrant(h)
	}
}
