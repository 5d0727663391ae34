package agentapi

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strconv"

	"slipway/runtime/agent"
	"slipway/server/httpx"
)

// The project's custom routes ("http": {"app": ...}) are mounted before
// the agent API, as the reference servers mount them: a route of the app
// shadows the API's on the same path and method, the app's middleware
// sees every request (and may answer it, add headers to the API's answer
// or change the request body the API reads), and what no route of the
// app serves is the API's, down to its own 404.

// ownPaths are served by Slipway before the app, whatever it routes: the
// health check the runtimes probe and the API's documents (the
// reference's unshadowable routes; with http.disable_meta the documents
// are off, and the app may serve those paths).
var ownPaths = map[string]bool{"/ok": true, "/docs": true, "/openapi.json": true}

// appFirst serves every request but ownPaths through the project's app,
// passing on to api what the app does not route.
func (a *API) appFirst(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ownPaths[r.URL.Path] && (r.URL.Path == "/ok" || !slices.Contains(a.Disabled, "meta")) {
			api.ServeHTTP(w, r)
			return
		}
		a.customRoute(w, r, api)
	})
}

// passThroughSkip are the headers of the app's fall-through answer that
// describe that answer's own body, not the API's.
var passThroughSkip = map[string]bool{"Content-Type": true, "Content-Encoding": true, "Date": true}

// passOn serves a request no route of the app served with api: with the
// body as the app's middleware left it, and with the headers the
// middleware added (the API's own headers win: it sets rather than adds).
func (a *API) passOn(w http.ResponseWriter, r *http.Request, req agent.HTTPRequest, resp agent.HTTPResponse, api http.Handler) {
	switch {
	case resp.BodyReplaced:
		if a.MaxBody > 0 && int64(len(resp.Body)) > a.MaxBody {
			httpx.WriteError(w, r, &http.MaxBytesError{Limit: a.MaxBody})
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(resp.Body))
		r.ContentLength = int64(len(resp.Body))
		r.Header.Set("Content-Length", strconv.Itoa(len(resp.Body)))
	case !req.BodyStreamed:
		r.Body = io.NopCloser(bytes.NewReader(req.Body))
	case resp.BodyRead:
		// The app read part of a streamed body and kept none of it: what
		// it read is gone, so the API cannot serve the request whole.
		httpx.WriteJSON(w, http.StatusBadGateway, map[string]any{"detail": "The project's custom routes read the request body and then left the request to the agent API; a body the app consumes cannot be read again. Have the middleware parse the body with the framework's own reader (Hono's c.req.json(), Starlette's request.body()), which keeps it."})
		return
	}
	for _, h := range resp.Headers {
		k := http.CanonicalHeaderKey(h[0])
		if !hopHeaders[k] && !passThroughSkip[k] {
			w.Header().Add(k, h[1])
		}
	}
	api.ServeHTTP(w, r)
}

// safeMethod reports whether a request of method may be sent to the app
// twice (RFC 9110's safe methods).
func safeMethod(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}
