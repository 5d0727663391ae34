package agentapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/google/uuid"
	"github.com/julienschmidt/httprouter"

	"slipway/runtime/agent"
	"slipway/server/httpx"
)

// API is the agent server's HTTP surface.
type API struct {
	Engine  *agent.Engine
	Version string
	MaxBody int64
}

// Handler routes every endpoint.
func (a *API) Handler() http.Handler {
	rt := httpx.Record(httpx.NewRouter())
	a.routes(rt)
	rt.PanicHandler = func(w http.ResponseWriter, r *http.Request, v any) {
		httpx.LogFrom(r).Error().Interface("panic", v).Msg("handler panic")
		httpx.WriteJSON(w, 500, map[string]any{"detail": "Internal server error."})
	}
	return httpx.LimitBody(rt, a.MaxBody)
}

// routes registers every endpoint on rt (the tests read them back to
// compare with the OpenAPI document).
func (a *API) routes(rt *httpx.Router) {
	h := func(fn httpx.Handle) httprouter.Handle { return httpx.Adapt(a.errors(fn)) }
	rt.GET("/ok", h(func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
		httpx.WriteJSON(w, 200, map[string]any{"ok": true})
		return nil
	}))
	rt.GET("/info", h(a.info))
	a.docRoutes(rt)
	a.assistantRoutes(rt, h)
	a.threadRoutes(rt, h)
	a.runRoutes(rt, h)
	a.storeRoutes(rt, h)
	if a.Engine.HasHTTPApp() {
		// Paths (and methods) the API does not own go to the project's
		// custom routes.
		rt.NotFound = http.HandlerFunc(a.customRoute)
		rt.MethodNotAllowed = http.HandlerFunc(a.customRoute)
	}
}

func (a *API) info(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	httpx.WriteJSON(w, 200, map[string]any{"version": a.Version, "server": "slipway-agent",
		"flags": map[string]any{"assistants": true, "crons": false, "langsmith": false}})
	return nil
}

// errors maps engine errors to statuses with a {"detail": ...} body.
func (a *API) errors(fn httpx.Handle) httpx.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		err := fn(w, r, ps)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, agent.ErrBusy):
			return httpx.Conflict("%s", agent.ErrBusy.Error())
		case errors.Is(err, agent.ErrNotFound):
			return httpx.NotFound("%s", strings.TrimPrefix(err.Error(), "not found: "))
		case errors.Is(err, agent.ErrConflict):
			return httpx.Conflict("%s", strings.TrimPrefix(err.Error(), "conflict: "))
		case errors.Is(err, agent.ErrInvalid):
			return httpx.Errorf(http.StatusUnprocessableEntity, "%s", strings.TrimPrefix(err.Error(), "invalid: "))
		}
		return err
	}
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
		return "", httpx.Errorf(http.StatusUnprocessableEntity, "thread_id %q is not a UUID", id)
	}
	return strings.ToLower(id), nil
}

func runID(ps httprouter.Params) (string, error) {
	id := ps.ByName("run_id")
	if _, err := uuid.Parse(id); err != nil {
		return "", httpx.Errorf(http.StatusUnprocessableEntity, "run_id %q is not a UUID", id)
	}
	return strings.ToLower(id), nil
}

func intParam(r *http.Request, name string, def, min, max int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min || n > max {
		return 0, httpx.Errorf(http.StatusUnprocessableEntity, "%s must be an integer from %d to %d", name, min, max)
	}
	return n, nil
}

// boolParam reads a query flag: true/false, 1/0 (absent is false).
func boolParam(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, httpx.Errorf(http.StatusUnprocessableEntity, "%s must be true or false", name)
	}
	return b, nil
}

func limitOffset(limit, offset *int, defLimit int) error {
	if *limit == 0 {
		*limit = defLimit
	}
	if *limit < 1 || *limit > 1000 {
		return httpx.Errorf(http.StatusUnprocessableEntity, "limit must be between 1 and 1000")
	}
	if *offset < 0 {
		return httpx.Errorf(http.StatusUnprocessableEntity, "offset must not be negative")
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
	return httpx.Errorf(http.StatusUnprocessableEntity, "%s must be one of %s, not %q", name, strings.Join(allowed, ", "), v)
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
		return rc, httpx.Errorf(http.StatusUnprocessableEntity, "assistant_id is required")
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
				return rc, httpx.Errorf(http.StatusUnprocessableEntity, "stream_mode must be a string or a list of strings")
			}
			rc.StreamMode = append(rc.StreamMode, s)
		}
	default:
		return rc, httpx.Errorf(http.StatusUnprocessableEntity, "stream_mode must be a string or a list of strings")
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
		return rc, httpx.Errorf(http.StatusUnprocessableEntity, "after_seconds must not be negative")
	}
	if msgs, ok := rc.Input["messages"]; ok {
		list, ok := msgs.([]any)
		if !ok {
			return rc, httpx.Errorf(http.StatusUnprocessableEntity, "input.messages must be a list of messages")
		}
		for i, m := range list {
			if _, err := agent.NormalizeMessage(m); err != nil {
				return rc, httpx.Errorf(http.StatusUnprocessableEntity, "input.messages[%d]: %v", i, err)
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
// host. The request body is buffered (it travels as one protocol
// message); answers of type text/event-stream or application/x-ndjson
// stream chunk by chunk, any other comes back whole.
func (a *API) customRoute(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	req := agent.HTTPRequest{Method: r.Method, URL: r.URL.RequestURI(), Body: body}
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
	resp, err := a.Engine.ServeHTTPApp(r.Context(), req, out)
	if err != nil {
		httpx.LogFrom(r).Error().Err(err).Msg("custom route")
		if !out.started() {
			httpx.WriteJSON(w, http.StatusBadGateway, map[string]any{"detail": "The project's custom routes failed: " + err.Error()})
		}
		return
	}
	if resp.Streamed {
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
