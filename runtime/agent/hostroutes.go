package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/google/uuid"
)

// HTTPRequest is a request for the project's custom routes, as the host
// protocol's "http" method carries it. Bodies travel base64-encoded: a
// small one in Body, a larger one (BodyStreamed) through the host's
// http.read calls, chunk by chunk as the app reads it.
type HTTPRequest struct {
	StreamID     string      `json:"stream_id"` // names the http.read, http.start and http.chunk calls of this request
	Method       string      `json:"method"`
	URL          string      `json:"url"` // path and query, e.g. /hello?x=1
	Headers      [][2]string `json:"headers"`
	Body         []byte      `json:"body"`
	BodyStreamed bool        `json:"body_streamed,omitempty"`
	// Fallthrough asks the host to answer Fallthrough, instead of the
	// app's 404, when none of the app's routes serves the request: the
	// app is mounted before the agent API (its routes shadow the API's,
	// its middleware sees every request) and what it does not route is
	// the API's.
	Fallthrough bool `json:"fallthrough,omitempty"`
}

// InlineBodyMax is the largest request body sent inside the "http" call;
// a larger one, or one of unknown length, is streamed (http.read).
const InlineBodyMax = 64 << 10

// httpExchange is a custom-route request in flight: where its streamed
// body comes from and where a streamed answer goes.
type httpExchange struct {
	out  HTTPStream
	body io.Reader

	mu      sync.Mutex // the host reads one chunk at a time, but a restart may overlap
	readErr error      // why reading the client's body stopped, other than its end
	read1   bool       // the host asked for some of the streamed body
	// answered is set once the host has answered the request: a read
	// arriving after that (the host's own calls are served on goroutines
	// of their own, so one sent before the answer may be served after it)
	// must not take bytes from a body the agent API now reads.
	answered bool
	// buf holds the chunk of the last http.read. One buffer serves every
	// read: the host asks for the next chunk only once it has the last
	// one's answer, which is encoded by then.
	buf []byte
}

// HTTPResponse is the custom routes' answer. Streamed says it went to
// the HTTPStream instead, chunk by chunk.
//
// Fallthrough says no route of the app served the request (asked for by
// HTTPRequest.Fallthrough): Headers are then those the app's middleware
// added, and BodyReplaced says Body is the request body as the
// middleware left it (changed, or parsed and serialised again), for the
// agent API to serve instead of the client's.
type HTTPResponse struct {
	Status       int         `json:"status"`
	Headers      [][2]string `json:"headers"`
	Body         []byte      `json:"body"`
	Streamed     bool        `json:"streamed"`
	Fallthrough  bool        `json:"fallthrough,omitempty"`
	BodyReplaced bool        `json:"body_replaced,omitempty"`
	// BodyRead says the host read some of a streamed request body: on a
	// fall-through without BodyReplaced those bytes are gone.
	BodyRead bool `json:"-"`
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

// AppOpenAPI is the OpenAPI document of the project's custom routes, as
// its language host derived it from the app (FastAPI's own, Starlette's
// and Hono's routes); nil when there is none.
func (e *Engine) AppOpenAPI() []byte {
	if !e.HasHTTPApp() {
		return nil
	}
	return e.App.openAPI
}

// ServeHTTPApp hands a request the agent API does not own to the
// project's app in the language host. With req.BodyStreamed the app reads
// body as it goes; otherwise req.Body is the whole body. A streamed answer
// goes to out as it comes; any other comes back whole.
//
// A body that failed to read (too large, the client gone) fails the
// request with that error, whatever the app made of its truncated body.
func (e *Engine) ServeHTTPApp(ctx context.Context, req HTTPRequest, body io.Reader, out HTTPStream) (HTTPResponse, error) {
	var res HTTPResponse
	if !e.HasHTTPApp() {
		return res, fmt.Errorf("%w: no custom routes", ErrNotFound)
	}
	req.StreamID = uuid.NewString()
	ex := &httpExchange{out: out, body: body}
	e.httpStreams.Store(req.StreamID, ex)
	defer e.httpStreams.Delete(req.StreamID)
	err := e.App.host.First().Call(ctx, "http", req, &res)
	var readErr error
	res.BodyRead, readErr = ex.end()
	if readErr != nil {
		return res, fmt.Errorf("custom route %s %s: reading the request body: %w", req.Method, req.URL, readErr)
	}
	if err != nil {
		return res, fmt.Errorf("custom route %s %s: %w", req.Method, req.URL, err)
	}
	if !res.Streamed && !res.Fallthrough && (res.Status < 100 || res.Status > 999) {
		return res, fmt.Errorf("custom route %s %s answered status %d", req.Method, req.URL, res.Status)
	}
	return res, nil
}

// httpStreamRequest serves the host's http.read, http.start and
// http.chunk calls. The host waits for each answer before it asks for or
// sends the next chunk, so neither a large upload nor a slow client fills
// memory.
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
	ex := v.(*httpExchange)
	switch method {
	case "http.read":
		return ex.read()
	case "http.start":
		if in.Status < 100 || in.Status > 999 {
			return nil, fmt.Errorf("status %d is not an HTTP status", in.Status)
		}
		return nil, ex.out.Start(in.Status, in.Headers)
	case "http.chunk":
		return nil, ex.out.Write(in.Body)
	}
	return nil, fmt.Errorf("unknown method %s", method)
}

// bodyChunk answers http.read: the next bytes of the request body, and
// whether it has ended. A chunk is never empty unless EOF is set.
type bodyChunk struct {
	Body []byte `json:"body"`
	EOF  bool   `json:"eof"`
}

// readChunk is the most an http.read answers with: well within the
// protocol's frame once base64-encoded.
const readChunk = 256 << 10

// errAnswered fails an http.read of a request the host has answered.
var errAnswered = errors.New("this custom-route request has been answered; its body is no longer the app's to read")

// end closes the exchange to further reads, once the host has answered,
// and tells whether the host read some of the body and why reading it
// failed. A read in progress finishes first: its bytes are the host's.
func (ex *httpExchange) end() (read1 bool, readErr error) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	ex.answered = true
	return ex.read1, ex.readErr
}

func (ex *httpExchange) read() (bodyChunk, error) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.answered {
		return bodyChunk{}, errAnswered
	}
	ex.read1 = true
	if ex.body == nil {
		return bodyChunk{EOF: true}, nil
	}
	if ex.readErr != nil {
		return bodyChunk{}, ex.readErr
	}
	// What has arrived, not a full buffer: an app consuming an upload as
	// it comes (NDJSON, say) sees each part when the client sends it.
	if ex.buf == nil {
		ex.buf = make([]byte, readChunk)
	}
	for {
		n, err := ex.body.Read(ex.buf)
		switch {
		case errors.Is(err, io.EOF):
			return bodyChunk{Body: ex.buf[:n], EOF: true}, nil
		case err != nil:
			ex.readErr = err
			return bodyChunk{}, err
		case n > 0:
			return bodyChunk{Body: ex.buf[:n]}, nil
		}
	}
}
