package server_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"slipway/server/apptest"
	"slipway/server/cors"
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
	s := apptest.New(t, map[string]string{"SLIPWAY_CORS_ALLOW_ORIGINS": allowed + ", https://smith.langchain.com"})
	servertest.EchoDeployment(t, s, "corsy", agent.URL, nil)
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
	// An origin the server-wide list does not name gets no grant from
	// Slipway; what the agent answered (its http.cors, "*" here) stands.
	t.Run("actual request from an origin the server does not list", func(t *testing.T) {
		r := s.Do("POST", "/agents/corsy/threads", "{}", "Origin", denied, "Content-Type", "application/json")
		if v := r.Header.Values("Access-Control-Allow-Origin"); r.Status != 200 || len(v) != 1 || v[0] != "*" {
			t.Fatalf("%d Allow-Origin %q; want 200 with the agent's own answer", r.Status, v)
		}
	})
}

// TestCORSDeploymentPolicyOnCustomHost: without a server-wide policy, a
// deployment's own http.cors (applied by its agent) answers preflights on
// its custom_url host, where the host alone names the deployment. The
// preflight reaches the agent with nothing of the caller's but its own
// three headers; on /agents/{name}/... (where a preflight cannot name the
// workspace) it is refused, and the actual request still needs the key.
func TestCORSDeploymentPolicyOnCustomHost(t *testing.T) {
	const allowed, host = "https://app.example.com", "agent.example.org"
	policy, err := cors.New(cors.Config{AllowOrigins: []string{allowed}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var preflights []http.Header
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions {
			mu.Lock()
			preflights = append(preflights, r.Header.Clone())
			mu.Unlock()
		}
		cors.Middleware(policy, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"thread_id":"t1"}`))
		})).ServeHTTP(w, r)
	}))
	t.Cleanup(agent.Close)
	s := apptest.New(t, nil)
	servertest.EchoDeployment(t, s, "own-cors", agent.URL, map[string]any{"custom_url": "https://" + host})

	send := func(method, path, hostHeader string, headers ...string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, s.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = hostHeader
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	pre := func(origin string) []string {
		return []string{"Origin", origin, "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "x-api-key,content-type",
			"Cookie", "slipway_session=secret; theirs=1", "Authorization", "Bearer secret"}
	}
	if r := send("OPTIONS", "/threads", host, pre(allowed)...); r.StatusCode != http.StatusNoContent || r.Header.Get("Access-Control-Allow-Origin") != allowed {
		t.Fatalf("preflight on the custom host: %d Allow-Origin %q", r.StatusCode, r.Header.Get("Access-Control-Allow-Origin"))
	}
	mu.Lock()
	got := append([]http.Header(nil), preflights...)
	mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("the agent saw %d preflights, want 1", len(got))
	}
	for k := range got[0] {
		switch k {
		case "Origin", "Access-Control-Request-Method", "Access-Control-Request-Headers", "User-Agent", "Accept-Encoding":
		default:
			t.Errorf("the relayed preflight carried %s: %q", k, got[0].Get(k))
		}
	}
	if r := send("OPTIONS", "/threads", host, pre("https://evil.example.net")...); r.StatusCode != http.StatusForbidden || r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("disallowed origin on the custom host: %d Allow-Origin %q", r.StatusCode, r.Header.Get("Access-Control-Allow-Origin"))
	}
	hostOnly := strings.TrimPrefix(s.URL, "http://")
	if r := send("OPTIONS", "/agents/own-cors/threads", hostOnly, pre(allowed)...); r.StatusCode != http.StatusForbidden || r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("preflight on /agents/own-cors: %d Allow-Origin %q; want 403 without a grant", r.StatusCode, r.Header.Get("Access-Control-Allow-Origin"))
	}
	if r := send("POST", "/threads", host, "Origin", allowed); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("actual request without a key: %d", r.StatusCode)
	}
	r := send("POST", "/threads", host, "Origin", allowed, "X-Api-Key", s.Key)
	if r.StatusCode != 200 || len(r.Header.Values("Access-Control-Allow-Origin")) != 1 || r.Header.Get("Access-Control-Allow-Origin") != allowed {
		t.Fatalf("actual request with the key: %d Allow-Origin %q", r.StatusCode, r.Header.Values("Access-Control-Allow-Origin"))
	}
}
