package httpx

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/rs/zerolog"
)

type ctxKey int

const (
	logKey ctxKey = iota
	reqIDKey
)

// LogFrom returns the request-scoped logger (a no-op logger outside the chain).
func LogFrom(r *http.Request) *zerolog.Logger {
	if l, ok := r.Context().Value(logKey).(*zerolog.Logger); ok {
		return l
	}
	l := zerolog.Nop()
	return &l
}

// RequestID returns the id assigned to the request by the middleware.
func RequestID(r *http.Request) string {
	id, _ := r.Context().Value(reqIDKey).(string)
	return id
}

// Chain wraps h with request id, access log and panic recovery. The access
// log names the path only (never the query or headers) so that keys and
// signed upload tokens never reach the log.
func Chain(h http.Handler, log zerolog.Logger) http.Handler {
	return ChainQuiet(h, log, nil)
}

// ChainQuiet is Chain whose access log leaves out the requests quiet
// names when they succeed (an agent's health checks: one line every few
// seconds would bury its output). A failed or aborted one is logged.
func ChainQuiet(h http.Handler, log zerolog.Logger, quiet func(*http.Request) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get("X-Request-Id")
		if id == "" || len(id) > 64 {
			var b [8]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set("X-Request-Id", id)
		l := log.With().Str("request_id", id).Logger()
		ctx := context.WithValue(context.WithValue(r.Context(), logKey, &l), reqIDKey, id)
		r = r.WithContext(ctx)
		sw := &StatusRecorder{ResponseWriter: w}
		defer func() {
			rec := recover()
			abort := rec == http.ErrAbortHandler
			if rec != nil && !abort {
				l.Error().Interface("panic", rec).Str("path", r.URL.Path).Msg("handler panic")
				if sw.status == 0 {
					WriteJSON(sw, http.StatusInternalServerError, map[string]any{"detail": "Internal server error."})
				} else {
					// Half an answer must not look whole: break the connection.
					abort = true
				}
			}
			if !abort && rec == nil && quiet != nil && sw.status < 400 && quiet(r) {
				return
			}
			ev := l.Info()
			if abort {
				ev = l.Warn().Bool("aborted", true)
			}
			ev.Str("method", r.Method).Str("path", r.URL.Path).Int("status", sw.status).
				Int("bytes", sw.bytes).Dur("duration", time.Since(start)).Msg("request")
			if abort {
				panic(http.ErrAbortHandler) // net/http closes the connection without a clean end
			}
		}()
		h.ServeHTTP(sw, r)
	})
}

// NewRouter returns an httprouter configured for a JSON API: JSON 404/405
// bodies and no redirects that would turn a POST into a GET. It sets no
// PanicHandler: a panic goes on to Chain, the one place that recovers,
// which lets http.ErrAbortHandler through (a proxied stream whose agent
// broke off must break for the client too, not end as if complete) and
// answers 500 only when nothing was written yet.
func NewRouter() *httprouter.Router {
	rt := httprouter.New()
	rt.RedirectFixedPath = false
	rt.RedirectTrailingSlash = false
	rt.HandleMethodNotAllowed = true
	rt.NotFound = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusNotFound, map[string]any{"detail": "Not Found"})
	})
	rt.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusMethodNotAllowed, map[string]any{"detail": "Method Not Allowed"})
	})
	return rt
}

// LimitBody caps request bodies; oversized bodies surface as *http.MaxBytesError → 413.
// A body whose Content-Length already says it is too large is refused at
// once, before anything of it is read.
func LimitBody(h http.Handler, max int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > max {
			WriteError(w, r, &http.MaxBytesError{Limit: max})
			return
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, max)
		}
		h.ServeHTTP(w, r)
	})
}
