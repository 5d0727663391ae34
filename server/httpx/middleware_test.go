package httpx

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/julienschmidt/httprouter"
	"github.com/rs/zerolog"
)

// TestChainRecoversPanics: behind NewRouter and Chain, a handler that
// panics before writing answers 500 with a detail; one that aborts a
// stream it began (http.ErrAbortHandler, as ReverseProxy does when the
// agent breaks off) breaks the client's connection, so the client sees a
// cut stream rather than one that ended cleanly; and so does any panic
// once the answer has begun (no 500 written into it).
func TestChainRecoversPanics(t *testing.T) {
	for _, tc := range []struct {
		name       string
		handler    func(w http.ResponseWriter)
		wantStatus int
		wantBody   string
		wantBroken bool
	}{
		{"panic before writing", func(http.ResponseWriter) { panic("boom") }, 500, `{"detail":"Internal server error."}`, false},
		{"aborted stream", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "event: metadata\ndata: {}\n\n")
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}, 200, "event: metadata\ndata: {}\n\n", true},
		{"panic mid-answer", func(w http.ResponseWriter) {
			_, _ = io.WriteString(w, "partial")
			w.(http.Flusher).Flush()
			panic("boom")
		}, 200, "partial", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := NewRouter()
			rt.GET("/x", func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) { tc.handler(w) })
			srv := httptest.NewUnstartedServer(Chain(rt, zerolog.Nop()))
			srv.Config.ErrorLog = nil
			srv.Start()
			defer srv.Close()
			resp, err := http.Get(srv.URL + "/x")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.wantStatus || strings.TrimSpace(string(body)) != strings.TrimSpace(tc.wantBody) {
				t.Fatalf("status %d body %q; want %d %q", resp.StatusCode, body, tc.wantStatus, tc.wantBody)
			}
			if broken := err != nil; broken != tc.wantBroken {
				t.Fatalf("reading the body: %v; want a broken connection: %v", err, tc.wantBroken)
			}
			if tc.wantBroken && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("reading the body: %v; want unexpected EOF", err)
			}
		})
	}
}
