package server_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"slipway/server/servertest"
)

// TestCORSThroughServe: with SLIPWAY_CORS_ALLOW_ORIGINS set, `slipway
// serve` answers a preflight to a deployment from an allowed origin itself,
// without an API key and without reaching the agent; a disallowed origin
// gets no grant; the actual request still needs the key, and its answer
// carries Slipway's grant alone (the agent's own "*" is dropped).
func TestCORSThroughServe(t *testing.T) {
	const allowed, denied = "https://ui.example.com", "https://evil.example.net"
	var mu sync.Mutex
	var seen []string
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Header().Set("Content-Location", "/threads/t1")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"thread_id":"t1"}`))
	}))
	t.Cleanup(agent.Close)
	s := servertest.Start(t, map[string]string{"SLIPWAY_CORS_ALLOW_ORIGINS": allowed + ", https://smith.langchain.com"})
	echoDeployment(t, s, "corsy", agent.URL, nil)
	agentSaw := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), seen...) }
	before := len(agentSaw())

	preflight := func(origin string) *servertest.Response {
		return servertest.Do(t, "OPTIONS", s.URL+"/agents/corsy/threads", nil, "Origin", origin,
			"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "content-type,x-api-key,last-event-id")
	}
	for _, tc := range []struct {
		name, origin string
		status       int
		grant        bool
	}{
		{"allowed origin, no key", allowed, http.StatusNoContent, true},
		{"studio", "https://smith.langchain.com", http.StatusNoContent, true},
		{"disallowed origin", denied, http.StatusForbidden, false},
	} {
		t.Run("preflight "+tc.name, func(t *testing.T) {
			r := preflight(tc.origin)
			got := r.Header.Get("Access-Control-Allow-Origin")
			if r.Status != tc.status || (got == tc.origin) != tc.grant || (!tc.grant && got != "") {
				t.Fatalf("%d Allow-Origin %q; want %d, grant %v (%s)", r.Status, got, tc.status, tc.grant, r.Body)
			}
			if !tc.grant {
				return
			}
			if h := strings.ToLower(r.Header.Get("Access-Control-Allow-Headers")); !strings.Contains(h, "x-api-key") || !strings.Contains(h, "last-event-id") {
				t.Fatalf("Allow-Headers %q", h)
			}
			if !strings.Contains(r.Header.Get("Access-Control-Allow-Methods"), "POST") || r.Header.Get("Access-Control-Allow-Credentials") != "" {
				t.Fatalf("Allow-Methods %q, Allow-Credentials %q", r.Header.Get("Access-Control-Allow-Methods"), r.Header.Get("Access-Control-Allow-Credentials"))
			}
		})
	}
	if saw := agentSaw()[before:]; len(saw) != 0 {
		t.Fatalf("preflights reached the agent: %v", saw)
	}

	t.Run("actual request without a key", func(t *testing.T) {
		r := servertest.Do(t, "POST", s.URL+"/agents/corsy/threads", "{}", "Origin", allowed, "Content-Type", "application/json")
		if r.Status != http.StatusUnauthorized || r.Header.Get("Access-Control-Allow-Origin") != allowed {
			t.Fatalf("%d Allow-Origin %q; want 401 readable by %s", r.Status, r.Header.Get("Access-Control-Allow-Origin"), allowed)
		}
		if saw := agentSaw()[before:]; len(saw) != 0 {
			t.Fatalf("an unauthenticated request reached the agent: %v", saw)
		}
	})
	t.Run("actual request with the key", func(t *testing.T) {
		r := s.Do("POST", "/agents/corsy/threads", "{}", "Origin", allowed, "Content-Type", "application/json")
		if r.Status != 200 {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		if v := r.Header.Values("Access-Control-Allow-Origin"); len(v) != 1 || v[0] != allowed {
			t.Fatalf("Allow-Origin %q; want %s alone (the agent's * dropped)", v, allowed)
		}
		if !strings.Contains(r.Header.Get("Access-Control-Expose-Headers"), "Content-Location") || !strings.Contains(strings.Join(r.Header.Values("Vary"), ","), "Origin") {
			t.Fatalf("Expose-Headers %q, Vary %q", r.Header.Get("Access-Control-Expose-Headers"), r.Header.Values("Vary"))
		}
	})
	t.Run("actual request from a disallowed origin", func(t *testing.T) {
		r := s.Do("POST", "/agents/corsy/threads", "{}", "Origin", denied, "Content-Type", "application/json")
		if r.Status != 200 || r.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Fatalf("%d Allow-Origin %q; want 200 without a grant", r.Status, r.Header.Get("Access-Control-Allow-Origin"))
		}
	})
}
