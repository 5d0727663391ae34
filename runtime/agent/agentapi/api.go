package agentapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/julienschmidt/httprouter"

	"slipway/oteltrace"
	"slipway/runtime/agent"
	"slipway/runtime/agent/hosts"
	"slipway/server/httpx"
)

// API is the agent server's HTTP surface.
type API struct {
	Engine  *agent.Engine
	Version string
	MaxBody int64
	// WaitHeartbeat is how often /runs/wait sends a newline while the run
	// goes on (leading whitespace is nothing to a JSON parser), so that
	// proxies and load balancers keep a long wait open; 0 is 5 s, the
	// reference servers' interval.
	WaitHeartbeat time.Duration
	// Disabled are the route groups ("assistants", "threads", "runs",
	// "store", "meta") the project's http.disable_* keys turn off: their
	// paths answer 404 (or reach the project's custom routes), as on the
	// reference servers. /ok stays.
	Disabled []string
	// UI are the bundled files of each graph's generative UI
	// (agent.BundleUI), served at /ui/{graph_id}.
	UI map[string][]agent.UIFile
	// Tracing gives requests their spans (otel.go); nil: off.
	Tracing *oteltrace.Provider
}

func (a *API) info(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	return reply(w)(map[string]any{"version": a.Version, "server": "slipway-agent",
		"flags": map[string]any{"assistants": true, "crons": true, "langsmith": false}}, nil)
}

// errors maps engine errors to statuses with a {"detail": ...} body: the
// agent process's one place for it. The statuses are the domain
// vocabulary's (httpx.DomainStatus, shared with the serve side); the
// detail is the engine's message without its kind's prefix ("not found:
// thread …"), a not-found worded as the reference servers word it.
func (a *API) errors(fn httpx.Handle) httpx.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		err := fn(w, r, ps)
		if err == nil {
			return nil
		}
		if errors.Is(err, agent.ErrBusy) {
			return httpx.Conflict("%s", agent.ErrBusy.Error())
		}
		status, kind, ok := httpx.DomainStatus(err)
		if !ok {
			return err
		}
		detail := strings.TrimPrefix(err.Error(), kind.Error()+": ")
		if kind == agent.ErrNotFound {
			detail = notFoundDetail(detail)
		}
		return httpx.Errorf(status, "%s", detail)
	}
}

// notFoundKinds are what the engine's ErrNotFound names as "<kind> <id>".
var notFoundKinds = map[string]string{"thread": "Thread", "run": "Run", "assistant": "Assistant", "checkpoint": "Checkpoint", "cron": "Cron"}

// notFoundDetail words a 404 as the reference servers do ("Thread <id>
// not found"), which clients and their users match on; other engine
// sentences are passed on, capitalised.
func notFoundDetail(what string) string {
	if kind, id, ok := strings.Cut(what, " "); ok && notFoundKinds[kind] != "" && !strings.Contains(id, " ") {
		return notFoundKinds[kind] + " " + id + " not found"
	}
	if what == "" {
		return "Not found"
	}
	return strings.ToUpper(what[:1]) + what[1:]
}

// decode reads an optional JSON object body (empty means {}), checked
// like every API body (httpx.CheckJSON) before it is decoded.
func decode(r *http.Request, v any) error {
	if r.ContentLength == 0 && r.Header.Get("Transfer-Encoding") == "" {
		return nil
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return httpx.JSONError(err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if err := httpx.CheckJSON(body); err != nil {
		return err
	}
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(v); err != nil {
		return httpx.JSONError(err)
	}
	return nil
}

// threadID validates a thread id path parameter.
func threadID(ps httprouter.Params) (string, error) {
	id := ps.ByName("thread_id")
	if _, err := uuid.Parse(id); err != nil {
		return "", httpx.Unprocessable("thread_id %q is not a UUID", id)
	}
	return strings.ToLower(id), nil
}

func runID(ps httprouter.Params) (string, error) {
	id := ps.ByName("run_id")
	if _, err := uuid.Parse(id); err != nil {
		return "", httpx.Unprocessable("run_id %q is not a UUID", id)
	}
	return strings.ToLower(id), nil
}

// maxLimit bounds every page of the agent API: its own range, 1..1000.
const maxLimit = 1000

// page is the limit and offset of a search body.
type page struct {
	Limit  int `json:"limit"`
	Offset int `json:"offset"`
}

// decodePage decodes a search body v that holds p, then checks p: limit
// 1..1000 (def when absent), offset not negative. (A limit or offset in
// the query string is read with httpx.QueryInt and httpx.LimitOffset.)
func decodePage(r *http.Request, v any, p *page, def int) error {
	if err := decode(r, v); err != nil {
		return err
	}
	if err := checkLimit(&p.Limit, def); err != nil {
		return err
	}
	if p.Offset < 0 {
		return httpx.Unprocessable("offset must not be negative")
	}
	return nil
}

// checkLimit defaults a body's limit to def and keeps it in 1..maxLimit.
func checkLimit(limit *int, def int) error {
	if *limit == 0 {
		*limit = def
	}
	if *limit < 1 || *limit > maxLimit {
		return httpx.Unprocessable("limit must be between 1 and %d", maxLimit)
	}
	return nil
}

func oneOf(v, name string, allowed ...string) error {
	if v == "" {
		return nil
	}
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return httpx.Unprocessable("%s must be one of %s, not %q", name, strings.Join(allowed, ", "), v)
}

// runRequest is the wire form of a run request: stream_mode may be a string
// or a list.
type runRequest struct {
	agent.RunCreate
	StreamMode any `json:"stream_mode"`
}

// DecodeRunCreate checks (httpx.CheckJSON), parses and validates a run
// request body.
func DecodeRunCreate(body []byte) (agent.RunCreate, error) {
	if err := httpx.CheckJSON(body); err != nil {
		return agent.RunCreate{}, err
	}
	return decodeRunCreate(body)
}

// decodeRunCreate is DecodeRunCreate for a body already checked (an item
// of a batch, checked with the whole body).
func decodeRunCreate(body []byte) (agent.RunCreate, error) {
	var rr runRequest
	if len(strings.TrimSpace(string(body))) > 0 {
		if err := json.Unmarshal(body, &rr); err != nil {
			return agent.RunCreate{}, httpx.JSONError(err)
		}
	}
	rc := rr.RunCreate
	if rc.AssistantID == "" {
		return rc, httpx.Unprocessable("assistant_id is required")
	}
	switch m := rr.StreamMode.(type) {
	case nil:
		rc.StreamMode = []string{"values"}
	case string:
		rc.StreamMode = []string{m}
	case []any:
		for _, x := range m {
			s, ok := x.(string)
			if !ok {
				return rc, httpx.Unprocessable("stream_mode must be a string or a list of strings")
			}
			rc.StreamMode = append(rc.StreamMode, s)
		}
	default:
		return rc, httpx.Unprocessable("stream_mode must be a string or a list of strings")
	}
	for _, m := range rc.StreamMode {
		if err := oneOf(m, "stream_mode", "values", "updates", "messages", "messages-tuple", "custom", "debug", "events", "tasks", "checkpoints"); err != nil {
			return rc, err
		}
	}
	for _, c := range []struct {
		v, name string
		allowed []string
	}{
		{rc.MultitaskStrategy, "multitask_strategy", []string{agent.StrategyReject, agent.StrategyInterrupt, agent.StrategyRollback, agent.StrategyEnqueue}},
		{rc.IfNotExists, "if_not_exists", []string{"create", "reject"}},
		{rc.OnDisconnect, "on_disconnect", []string{"cancel", "continue"}},
		{rc.OnCompletion, "on_completion", []string{"delete", "keep"}},
	} {
		if err := oneOf(c.v, c.name, c.allowed...); err != nil {
			return rc, err
		}
	}
	if rc.AfterSeconds < 0 {
		return rc, httpx.Unprocessable("after_seconds must not be negative")
	}
	if msgs, ok := rc.Input["messages"]; ok {
		list, ok := msgs.([]any)
		if !ok {
			return rc, httpx.Unprocessable("input.messages must be a list of messages")
		}
		for i, m := range list {
			if _, err := agent.NormalizeMessage(m); err != nil {
				return rc, httpx.Unprocessable("input.messages[%d]: %v", i, err)
			}
		}
	}
	return rc, nil
}

// hopHeaders are per-connection headers that a custom route's answer must
// not carry over (the agent's own server sets them).
var hopHeaders = map[string]bool{"Connection": true, "Keep-Alive": true, "Transfer-Encoding": true,
	"Content-Length": true, "Upgrade": true, "Trailer": true}

// customRoute serves a request through the project's app in the language
// host. A body of known length up to agent.InlineBodyMax travels in the
// request's message; a larger one, or one sent chunked, streams to the
// app as it reads it. Answers of type text/event-stream or
// application/x-ndjson stream chunk by chunk, any other comes back whole.
// What no route of the app serves goes on to api (see passOn).
func (a *API) customRoute(w http.ResponseWriter, r *http.Request, api http.Handler) {
	req := agent.HTTPRequest{Method: r.Method, URL: r.URL.RequestURI(), Fallthrough: true}
	var body io.Reader
	if r.ContentLength >= 0 && r.ContentLength <= agent.InlineBodyMax {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			httpx.WriteError(w, r, err)
			return
		}
		req.Body = b
	} else {
		req.BodyStreamed, body = true, r.Body
		// An app may answer while it still reads the upload; without
		// this the server stops reading the body once the answer starts.
		_ = http.NewResponseController(w).EnableFullDuplex()
		// What the app left unread is drained before this handler
		// returns: net/http's own drain after it collides with the next
		// request's read on a kept-alive connection (golang/go#68560).
		defer r.Body.Close()
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			req.Headers = append(req.Headers, [2]string{k, v})
		}
	}
	if r.Host != "" {
		req.Headers = append(req.Headers, [2]string{"Host", r.Host})
	}
	out := &routeStream{w: w, ctx: r.Context()}
	// A chunk still in flight when the client left must not touch w
	// once this handler has returned.
	defer out.close()
	resp, err := a.Engine.ServeHTTPApp(r.Context(), req, body, out)
	if errors.Is(err, hosts.ErrHostDied) && !out.started() && !resp.BodyRead && safeMethod(r.Method) {
		// The host was restarted under the request (a cancelled run's
		// node that would not stop, a crash): the call waits for the new
		// one. Only a safe method is sent again; the app may have acted
		// on another.
		httpx.LogFrom(r).Warn().Err(err).Msg("custom route: the language host restarted; sending the request again")
		resp, err = a.Engine.ServeHTTPApp(r.Context(), req, body, out)
	}
	if err != nil {
		var tooLarge *http.MaxBytesError
		switch {
		case out.started():
			httpx.LogFrom(r).Error().Err(err).Msg("custom route")
		case errors.As(err, &tooLarge):
			httpx.WriteError(w, r, tooLarge)
		case errors.Is(err, hosts.ErrHostDied):
			// The host's last output stays in the log: it is the
			// deployment's, not the client's.
			httpx.LogFrom(r).Error().Err(err).Msg("custom route")
			w.Header().Set("Retry-After", "1")
			httpx.WriteJSON(w, http.StatusServiceUnavailable, map[string]any{"detail": "The deployment's language host restarted while it served this request; send it again."})
		default:
			httpx.LogFrom(r).Error().Err(err).Msg("custom route")
			httpx.WriteJSON(w, http.StatusBadGateway, map[string]any{"detail": "The project's custom routes failed on this request; the deployment's log has the error."})
		}
		return
	}
	if resp.Streamed {
		return
	}
	if resp.Fallthrough {
		a.passOn(w, r, req, resp, api)
		return
	}
	copyHeaders(w, resp.Headers)
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

func copyHeaders(w http.ResponseWriter, headers [][2]string) {
	for _, h := range headers {
		if !hopHeaders[http.CanonicalHeaderKey(h[0])] {
			w.Header().Add(h[0], h[1])
		}
	}
}

// routeStream writes a streamed custom-route answer to the client,
// flushing each chunk. Its calls come from the host connection's
// goroutines, one at a time (the host awaits each).
type routeStream struct {
	w   http.ResponseWriter
	ctx context.Context

	mu     sync.Mutex
	began  bool
	closed bool
}

func (s *routeStream) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

func (s *routeStream) started() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.began
}

func (s *routeStream) Start(status int, headers [][2]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.began || s.closed {
		return errors.New("the answer has already started, or its client has gone away")
	}
	s.began = true
	copyHeaders(s.w, headers)
	s.w.WriteHeader(status)
	return s.flush()
}

func (s *routeStream) Write(chunk []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.began {
		return errors.New("a chunk before the answer's start")
	}
	if err := s.ctx.Err(); err != nil || s.closed {
		return errors.New("the client has gone away")
	}
	if _, err := s.w.Write(chunk); err != nil {
		return fmt.Errorf("write to the client: %w", err)
	}
	return s.flush()
}

func (s *routeStream) flush() error {
	return http.NewResponseController(s.w).Flush()
}
