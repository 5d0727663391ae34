package server

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/julienschmidt/httprouter"

	"slipway/runtime"
	"slipway/server/cors"
	"slipway/server/httpx"
)

// Cross-origin requests to a deployment meet two policies:
//   - the server-wide one, SLIPWAY_CORS_ALLOW_ORIGINS, which Slipway
//     applies itself on every way to every deployment (/agents/{name}/...,
//     the agents origin, a custom_url host);
//   - the deployment's own, langgraph.json's http.cors, which its agent
//     applies (agentapi.projectCORS) on the answers it gives.
//
// A preflight carries no credential, so it never reaches authentication
// and is never forwarded as the caller's request: withCORS answers it
// from the server-wide policy, or, on a custom_url host (where the host
// alone names the deployment), from the deployment's agent, asked with
// nothing of the caller's but the preflight's own headers. On
// /agents/{name}/... a preflight cannot name the deployment (names are per
// workspace, and the workspace comes from the credential), so there only
// the server-wide policy answers. Either way a preflight grants nothing:
// the request it announces still needs an API key.

// preflightHeaders are the request headers a preflight relayed to an agent
// keeps; nothing else of the caller's reaches it.
var preflightHeaders = []string{"Origin", "Access-Control-Request-Method", "Access-Control-Request-Headers"}

// withCORS puts the cross-origin policies in front of the proxy's
// authentication. An actual request from an origin the server-wide policy
// allows gets Slipway's grant on whatever answers it, a 401 included, so
// the page's script can read why it failed.
func (p *proxy) withCORS(next httprouter.Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if cors.IsPreflight(r) {
			p.preflight(w, r, ps)
			return
		}
		if r.Header.Get("Origin") != "" && p.cors != nil {
			p.cors.Decorate(w.Header(), r)
		}
		next(w, r, ps)
	}
}

// preflight answers a preflight (see the comment at the top).
func (p *proxy) preflight(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	if p.cors.Allows(r.Header.Get("Origin")) {
		p.cors.Preflight(w, r)
		return
	}
	if r.Context().Value(customHostKey{}) != nil && p.relayPreflight(w, r, ps) {
		return
	}
	w.Header().Add("Vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers")
	httpx.WriteJSON(w, http.StatusForbidden, map[string]any{"detail": "Cross-origin request not allowed."})
}

// relayPreflight asks the agent of the deployment a custom_url host names
// (byHost set the workspace) to answer a preflight with its http.cors, and
// passes back its status and its Access-Control-* and Vary headers only.
// False: no agent answered; the caller refuses the preflight.
func (p *proxy) relayPreflight(w http.ResponseWriter, r *http.Request, ps httprouter.Params) bool {
	ws, err := uuid.Parse(r.Header.Get("X-Tenant-Id"))
	if err != nil {
		return false
	}
	dep, ok := p.cp.DeploymentByName(ws, ps.ByName("name"))
	if !ok {
		return false
	}
	endpoint, ok := p.driver.Endpoint(dep)
	if !ok {
		return false
	}
	base, token, err := agentURL(endpoint)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	u := *base
	u.Path = "/" + strings.TrimPrefix(ps.ByName("path"), "/")
	req, err := http.NewRequestWithContext(ctx, http.MethodOptions, u.String(), nil)
	if err != nil {
		return false
	}
	for _, k := range preflightHeaders {
		if v := r.Header.Get(k); v != "" {
			req.Header.Set(k, v)
		}
	}
	if token != "" {
		req.Header.Set(runtime.AgentTokenHeader, token)
	}
	resp, err := p.reverseProxy().Transport.RoundTrip(req)
	if err != nil {
		p.log.Warn().Err(err).Str("deployment", dep).Msg("relay a preflight")
		return false
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		if k = http.CanonicalHeaderKey(k); strings.HasPrefix(k, "Access-Control-") || k == "Vary" {
			w.Header()[k] = vs
		}
	}
	if resp.Header.Get("Access-Control-Allow-Origin") == "" {
		return false
	}
	w.WriteHeader(resp.StatusCode)
	return true
}

// stripAgentCORS drops the agent's own Access-Control-* headers when
// Slipway granted the request itself: they would duplicate the grant (a
// browser refuses two Allow-Origin values) or widen it. A request the
// server-wide policy does not allow keeps the agent's answer: the
// deployment's http.cors.
func (p *proxy) stripAgentCORS(resp *http.Response) {
	if p.cors.Allows(resp.Request.Header.Get("Origin")) {
		cors.StripGrant(resp.Header)
	}
}
