package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"slipway/runtime"
	"slipway/server/apidoc"
	"slipway/server/httpx"
)

// A deployment's API reference, /agents/{name}/docs, is Slipway's page,
// not the deployment's: the proxy renders it from the deployment's
// /openapi.json (the agent API's document, with the project's custom
// routes merged in) with the same server-side renderer and
// Content-Security-Policy as Slipway's own /docs. So it can be served on
// Slipway's own origin, where a signed-in browser holds its credential:
// a browser cannot send X-Api-Key with a navigation, and the agents
// origin (SLIPWAY_AGENTS_URL) takes no cookie.
//   - On the dashboard's origin the page is not redirected to the agents
//     origin (agentsOnDashboard): nothing of the deployment's runs there.
//   - On the agents origin a navigation without a credential is
//     redirected (307) to the same path on Slipway's public URL.
//   - On a deployment's custom_url, its own origin, the agent's page
//     (the same renderer) is relayed as any other path.
// The page's content comes from the document through html/template, so
// whatever a custom route's document says is text, never markup.

// docsPath reports whether path, below /agents/{name}, is the page.
func docsPath(path string) bool { return path == "/docs" || path == "/docs/" }

// slipwayServed reports whether path, below /agents/{name}, is the page
// or the document it links to, which the proxy serves itself (checked to
// be JSON) so that the link works where the page does.
func slipwayServed(path string) bool { return docsPath(path) || path == "/openapi.json" }

// docJSON answers the deployment's document, checked to be JSON.
func (p *proxy) docJSON(w http.ResponseWriter, r *http.Request, t target) error {
	doc, err := p.agentDoc(r.Context(), t)
	if err != nil {
		return err
	}
	if !json.Valid(doc) {
		return httpx.Errorf(http.StatusBadGateway, "The deployment's API document is not JSON.")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "sandbox")
	w.Header().Set("Cache-Control", "no-store")
	if r.Method == http.MethodHead {
		return nil
	}
	_, _ = w.Write(doc)
	return nil
}

// maxAgentDoc bounds the document read from an agent.
const maxAgentDoc = 8 << 20

// docs answers the page of the deployment t names.
func (p *proxy) docs(w http.ResponseWriter, r *http.Request, t target) error {
	doc, err := p.agentDoc(r.Context(), t)
	if err != nil {
		return err
	}
	// The document beside the page: the same prefix, whichever way the
	// page was reached (/agents/{name}/docs, a custom_url's /docs).
	jsonPath := strings.TrimSuffix(strings.TrimSuffix(r.URL.Path, "/"), "docs") + "openapi.json"
	page, err := apidoc.RenderHTML(doc, jsonPath)
	if err != nil {
		return httpx.Errorf(http.StatusBadGateway, "The deployment's API document cannot be rendered: %v", err)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", apidoc.DocsCSP)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	if r.Method == http.MethodHead {
		return nil
	}
	_, _ = w.Write(page)
	return nil
}

// agentDoc reads the deployment's /openapi.json from its agent.
func (p *proxy) agentDoc(ctx context.Context, t target) ([]byte, error) {
	ctx = context.WithValue(ctx, targetKey{}, t)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.base.JoinPath("openapi.json").String(), nil)
	if err != nil {
		return nil, fmt.Errorf("the deployment's API document: %w", err)
	}
	if t.token != "" {
		req.Header.Set(runtime.AgentTokenHeader, t.token)
	}
	resp, err := p.reverseProxy().Transport.RoundTrip(req)
	if err != nil {
		return nil, httpx.Errorf(http.StatusBadGateway, "The deployment's agent server did not answer: %v", err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, httpx.NotFound("The deployment serves no API document (its langgraph.json sets http.disable_meta).")
	case resp.StatusCode != http.StatusOK:
		return nil, httpx.Errorf(http.StatusBadGateway, "The deployment's agent server answered %d for its API document.", resp.StatusCode)
	}
	doc, err := io.ReadAll(io.LimitReader(resp.Body, maxAgentDoc+1))
	if err != nil {
		return nil, httpx.Errorf(http.StatusBadGateway, "Reading the deployment's API document: %v", err)
	}
	if len(doc) > maxAgentDoc {
		return nil, httpx.Errorf(http.StatusBadGateway, "The deployment's API document is larger than %d MiB.", maxAgentDoc>>20)
	}
	return doc, nil
}

// docsToPublic wraps the agents origin's /agents/{name}/... routes: a
// navigation to a deployment's page without a credential (the agents
// origin takes no cookie) is redirected to the same path on Slipway's
// public URL, where a signed-in browser's cookie counts.
func (a *app) docsToPublic(h httprouter.Handle) httprouter.Handle {
	base := strings.TrimRight(a.cfg.PublicURL, "/")
	if base == "" {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if slipwayServed(ps.ByName("path")) && pageRequest(r) && r.Header.Get("X-Api-Key") == "" && r.Header.Get("Authorization") == "" {
			w.Header().Set("Cache-Control", "no-store")
			http.Redirect(w, r, base+r.URL.RequestURI(), http.StatusTemporaryRedirect)
			return
		}
		h(w, r, ps)
	}
}
