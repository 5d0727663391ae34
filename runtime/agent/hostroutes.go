package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
)

// HTTPRequest is a request for the project's custom routes, as the host
// protocol's "http" method carries it. Bodies travel base64-encoded.
type HTTPRequest struct {
	StreamID string      `json:"stream_id"` // names the answer's http.start and http.chunk calls
	Method   string      `json:"method"`
	URL      string      `json:"url"` // path and query, e.g. /hello?x=1
	Headers  [][2]string `json:"headers"`
	Body     []byte      `json:"body"`
}

// HTTPResponse is the custom routes' answer. Streamed says it went to
// the HTTPStream instead, chunk by chunk.
type HTTPResponse struct {
	Status   int         `json:"status"`
	Headers  [][2]string `json:"headers"`
	Body     []byte      `json:"body"`
	Streamed bool        `json:"streamed"`
}

// HTTPStream receives a streamed custom-route answer (server-sent events,
// NDJSON): the status and headers once, then each chunk as the app
// produces it. An error (the client went away) stops the app's stream.
type HTTPStream interface {
	Start(status int, headers [][2]string) error
	Write(chunk []byte) error
}

// HasHTTPApp reports whether the project's custom routes are served.
func (e *Engine) HasHTTPApp() bool { return e != nil && e.App != nil && e.App.host != nil }

// ServeHTTPApp hands a request the agent API does not own to the
// project's app in the language host. A streamed answer goes to out as it
// comes; any other comes back whole.
func (e *Engine) ServeHTTPApp(ctx context.Context, req HTTPRequest, out HTTPStream) (HTTPResponse, error) {
	var res HTTPResponse
	if !e.HasHTTPApp() {
		return res, fmt.Errorf("%w: no custom routes", ErrNotFound)
	}
	req.StreamID = uuid.NewString()
	e.httpStreams.Store(req.StreamID, out)
	defer e.httpStreams.Delete(req.StreamID)
	if err := e.App.host.Call(ctx, "http", req, &res); err != nil {
		return res, fmt.Errorf("custom route %s %s: %w", req.Method, req.URL, err)
	}
	if !res.Streamed && (res.Status < 100 || res.Status > 999) {
		return res, fmt.Errorf("custom route %s %s answered status %d", req.Method, req.URL, res.Status)
	}
	return res, nil
}

// httpStreamRequest serves the host's http.start and http.chunk calls.
// The host waits for each answer before it sends the next chunk, so a slow
// client slows the app down instead of filling memory.
func (e *Engine) httpStreamRequest(method string, p json.RawMessage) (any, error) {
	var in struct {
		StreamID string      `json:"stream_id"`
		Status   int         `json:"status"`
		Headers  [][2]string `json:"headers"`
		Body     []byte      `json:"body"`
	}
	if err := json.Unmarshal(p, &in); err != nil {
		return nil, err
	}
	v, ok := e.httpStreams.Load(in.StreamID)
	if !ok {
		return nil, errors.New("the client of this custom route has gone away")
	}
	out := v.(HTTPStream)
	switch method {
	case "http.start":
		if in.Status < 100 || in.Status > 999 {
			return nil, fmt.Errorf("status %d is not an HTTP status", in.Status)
		}
		return nil, out.Start(in.Status, in.Headers)
	case "http.chunk":
		return nil, out.Write(in.Body)
	}
	return nil, fmt.Errorf("unknown method %s", method)
}
