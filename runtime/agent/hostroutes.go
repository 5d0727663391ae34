package agent

import (
	"context"
	"fmt"
)

// HTTPRequest is a request for the project's custom routes, as the host
// protocol's "http" method carries it. Bodies travel base64-encoded.
type HTTPRequest struct {
	Method  string      `json:"method"`
	URL     string      `json:"url"` // path and query, e.g. /hello?x=1
	Headers [][2]string `json:"headers"`
	Body    []byte      `json:"body"`
}

// HTTPResponse is the custom routes' answer.
type HTTPResponse struct {
	Status  int         `json:"status"`
	Headers [][2]string `json:"headers"`
	Body    []byte      `json:"body"`
}

// HasHTTPApp reports whether the project's custom routes are served.
func (e *Engine) HasHTTPApp() bool { return e.httpHost != nil }

// ServeHTTPApp hands a request the agent API does not own to the
// project's app in the language host.
func (e *Engine) ServeHTTPApp(ctx context.Context, req HTTPRequest) (HTTPResponse, error) {
	var out HTTPResponse
	if e.httpHost == nil {
		return out, fmt.Errorf("%w: no custom routes", ErrNotFound)
	}
	if err := e.httpHost.Call(ctx, "http", req, &out); err != nil {
		return out, fmt.Errorf("custom route %s %s: %w", req.Method, req.URL, err)
	}
	if out.Status < 100 || out.Status > 999 {
		return out, fmt.Errorf("custom route %s %s answered status %d", req.Method, req.URL, out.Status)
	}
	return out, nil
}
