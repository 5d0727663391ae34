package server

import (
	"net/http"
	"strings"

	"github.com/google/uuid"
	"github.com/julienschmidt/httprouter"

	"slipway/runtime/agent/agentapi"
	"slipway/server/httpx"
)

// A deployment's generative UI files (its graphs' bundled components,
// "ui" in langgraph.json) are loaded by a frontend's page with <script>
// and <link> elements, which send no credential: the reference serves
// GET /ui/... without authentication. Slipway serves them, and nothing
// else, without a credential at /ui-assets/{deployment_id}/ui/{graph}/{file}
// on the agents base (SLIPWAY_AGENTS_URL, and then only there; else the
// public URL), the URL
// the agent names in its answer to POST /ui/{graph} (which needs a
// credential as every deployment path does; the proxy tells the agent
// that base in agentapi.UIBaseHeader). The deployment's id, not its
// name, names it: names are only unique in a workspace. The request
// reaches the agent with no header of the caller's but Accept, and the
// answer is sandboxed as every agent answer on Slipway's origins.

// uiAssetBase is the base URL of deployment dep's UI files.
func (p *proxy) uiAssetBase(dep string) string {
	return strings.TrimRight(p.cp.AgentsBase(), "/") + "/ui-assets/" + dep
}

// uiAsset serves GET /ui-assets/:dep/ui/:graph/:file.
func (p *proxy) uiAsset(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	if p.agentsOrigin && r.Context().Value(agentsOriginKey{}) == nil {
		// With an agents origin, nothing of a deployment's is served on
		// the dashboard's origin; the agents base names that origin.
		return httpx.NotFound("Not Found")
	}
	id, err := uuid.Parse(ps.ByName("dep"))
	if err != nil {
		return httpx.NotFound("Not Found")
	}
	dep := id.String()
	endpoint, ok := p.driver.Endpoint(dep)
	if !ok {
		return httpx.NotFound("Not Found")
	}
	base, token, err := agentURL(endpoint)
	if err != nil {
		return err
	}
	h := http.Header{}
	if a := r.Header.Get("Accept"); a != "" {
		h.Set("Accept", a)
	}
	r.Header = h
	r.Body = http.NoBody
	r.ContentLength = 0
	t := target{dep: dep, base: base, token: token, sandbox: true,
		path: "/ui/" + ps.ByName("graph") + "/" + ps.ByName("file")}
	return p.relay(w, r, t)
}

// uiAssetRoutes registers the UI files' route on rt.
func (p *proxy) uiAssetRoutes(rt interface {
	Handle(string, string, httprouter.Handle)
}) {
	h := httpx.Adapt(p.uiAsset)
	rt.Handle(http.MethodGet, "/ui-assets/:dep/ui/:graph/:file", h)
	rt.Handle(http.MethodHead, "/ui-assets/:dep/ui/:graph/:file", h)
}

// uiBaseHeader is agentapi.UIBaseHeader, which Rewrite sets.
const uiBaseHeader = agentapi.UIBaseHeader
