package agentapi

import (
	"encoding/json"
	"html"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/julienschmidt/httprouter"

	"slipway/runtime/agent"
	"slipway/server/httpx"
)

// Generative UI ("ui" in langgraph.json): POST /ui/{graph_id} answers
// the HTML the SDK's LoadExternalComponent puts in its shadow root (the
// graph's stylesheet, and its script whose onload renders the named
// component), GET /ui/{graph_id}/{file} the bundled files (agent.BundleUI).

// UIBaseHeader is set by Slipway's proxy to the URL the graph's UI files
// are fetched from by a browser (no credential: a script element sends
// none); absent, the files are named on the host and scheme the request
// came to.
const UIBaseHeader = "X-Slipway-Ui-Base"

type uiRequest struct {
	Name string `json:"name"`
}

func (a *API) uiFiles(graph string) ([]agent.UIFile, error) {
	files, ok := a.UI[graph]
	if !ok {
		return nil, httpx.NotFound("UI not found for graph '%s'", graph)
	}
	return files, nil
}

// uiHTML answers POST /ui/{graph_id}.
func (a *API) uiHTML(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	var req uiRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Name == "" {
		return httpx.Unprocessable("name: the component to render is required")
	}
	graph := ps.ByName("graph_id")
	files, err := a.uiFiles(graph)
	if err != nil {
		return err
	}
	base := uiBase(r) + "/ui/" + url.PathEscape(graph) + "/"
	name, _ := json.Marshal(req.Name)
	var out []string
	for _, f := range files {
		src := html.EscapeString(base + url.PathEscape(f.Name))
		switch path.Ext(f.Name) {
		case ".css":
			out = append(out, `<link rel="stylesheet" href="`+src+`" />`)
		case ".js":
			// The SDK replaces {{shadowRootId}} with its shadow root's id.
			out = append(out, `<script src="`+src+`" onload='`+agent.UIGlobal(graph)+`.render(`+
				html.EscapeString(string(name))+`, "{{shadowRootId}}")'></script>`)
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write([]byte(strings.Join(out, "\n")))
	return nil
}

// uiFile answers GET /ui/{graph_id}/{file}.
func (a *API) uiFile(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	files, err := a.uiFiles(ps.ByName("graph_id"))
	if err != nil {
		return err
	}
	for _, f := range files {
		if f.Name == ps.ByName("file") {
			w.Header().Set("Content-Type", mime.TypeByExtension(path.Ext(f.Name)))
			w.Header().Set("X-Content-Type-Options", "nosniff")
			_, _ = w.Write(f.Contents)
			return nil
		}
	}
	return httpx.NotFound("File not found")
}

// uiBase is where a browser fetches this agent's UI files: the proxy's
// UIBaseHeader, else the request's own scheme and host.
func uiBase(r *http.Request) string {
	if b := r.Header.Get(UIBaseHeader); strings.HasPrefix(b, "https://") || strings.HasPrefix(b, "http://") {
		return strings.TrimRight(b, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
