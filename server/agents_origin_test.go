package server_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"slipway/server/apptest"
	"slipway/server/servertest"
)

// plantedCookies are what a hostile deployment answers with: each would
// replace, or be read as, one of the dashboard's cookies.
var plantedCookies = []string{
	"slipway_session=ATTACKER; Path=/",
	"slipway_csrf=ATTACKER; Path=/",
	"__Host-slipway_session=ATTACKER; Path=/; Secure",
	"__Host-slipway_csrf=ATTACKER; Path=/; Secure",
	" SLIPWAY_WORKSPACE=ATTACKER; Path=/",
	"=slipway_session=ATTACKER; Path=/",
}

// agentOwnCookie is a cookie of the deployment's own, which passes.
const agentOwnCookie = "theme=dark; Path=/agents/planter"

// cookiePlanter is an agent answering every request with plantedCookies
// and agentOwnCookie, its body the Cookie header it received.
func cookiePlanter(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, c := range plantedCookies {
			w.Header().Add("Set-Cookie", c)
		}
		w.Header().Add("Set-Cookie", agentOwnCookie)
		io.WriteString(w, "cookie: "+r.Header.Get("Cookie"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// send is one request to s's listener at url with the given Host header
// (none: the URL's), not checked against the API document (the agents
// origin serves no API).
func send(t *testing.T, method, url, host string, headers ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// signInCookies signs in to the dashboard with s's key and returns the
// Cookie header a browser would then send.
func signInCookies(t *testing.T, s *servertest.Server) string {
	t.Helper()
	r := s.Do("POST", "/ui/session", map[string]any{"api_key": s.Key}, "X-Api-Key", "")
	if r.Status != 200 {
		t.Fatalf("sign in: %d %s", r.Status, r.Body)
	}
	var pairs []string
	for _, c := range r.Header.Values("Set-Cookie") {
		if pair, _, _ := strings.Cut(c, ";"); !strings.HasSuffix(pair, "=") {
			pairs = append(pairs, pair)
		}
	}
	return strings.Join(pairs, "; ")
}

// TestAgentsOriginByHost: with SLIPWAY_AGENTS_URL, requests whose Host is
// the agents origin's are served /agents/{name}/... only, with API keys
// only (the dashboard's cookies are no credential there); deployments'
// url names it; on the dashboard's origin a page request is redirected
// there, and a script's request is still served, without any of the
// deployment's cookies. No Slipway cookie a deployment answers passes on
// either origin.
func TestAgentsOriginByHost(t *testing.T) {
	addr := servertest.FreeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	agentsHost := "agents.example.test:" + port
	s := apptest.New(t, map[string]string{"SLIPWAY_ADDR": addr, "SLIPWAY_AGENTS_URL": "http://" + agentsHost + "/"})
	dep := servertest.EchoDeployment(t, s, "planter", cookiePlanter(t), nil)
	if u, _ := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["url"].(string); u != "http://"+agentsHost+"/agents/planter" {
		t.Errorf("deployment url %q, want it on the agents origin", u)
	}
	cookies := signInCookies(t, s)

	planted := func(t *testing.T, resp *http.Response) {
		t.Helper()
		for _, c := range resp.Header.Values("Set-Cookie") {
			if strings.Contains(c, "ATTACKER") {
				t.Errorf("a planted cookie passed: %q", c)
			}
		}
	}
	t.Run("agents origin with a key", func(t *testing.T) {
		resp, body := send(t, "GET", s.URL+"/agents/planter/x", agentsHost, "X-Api-Key", s.Key, "Cookie", cookies+"; theme=dark")
		if resp.StatusCode != 200 || body != "cookie: theme=dark" {
			t.Fatalf("%d %q, want 200 and only the deployment's own cookie at the agent", resp.StatusCode, body)
		}
		planted(t, resp)
		if !slices.Contains(resp.Header.Values("Set-Cookie"), agentOwnCookie) {
			t.Errorf("the deployment's own cookie did not pass: %q", resp.Header.Values("Set-Cookie"))
		}
		if resp.Header.Get("Content-Security-Policy") != "sandbox" {
			t.Errorf("Content-Security-Policy %q: deployments share the agents origin, so their pages are sandboxed", resp.Header.Get("Content-Security-Policy"))
		}
	})
	t.Run("agents origin with the dashboard's cookies", func(t *testing.T) {
		for _, m := range []string{"GET", "POST"} {
			if resp, body := send(t, m, s.URL+"/agents/planter/x", agentsHost, "Cookie", cookies); resp.StatusCode != 401 {
				t.Errorf("%s: %d %s, want 401: the dashboard's cookies are no credential on the agents origin", m, resp.StatusCode, body)
			}
		}
	})
	t.Run("agents origin serves no API nor dashboard", func(t *testing.T) {
		for _, path := range []string{"/", "/v2/deployments", "/ui/session", "/api/v1/workspaces"} {
			if resp, body := send(t, "GET", s.URL+path, agentsHost, "X-Api-Key", s.Key); resp.StatusCode != 404 {
				t.Errorf("GET %s on the agents origin: %d %.200s, want 404", path, resp.StatusCode, body)
			}
		}
	})
	t.Run("dashboard origin, navigation", func(t *testing.T) {
		resp, _ := send(t, "POST", s.URL+"/agents/planter/x/y?q=1", "", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document", "Cookie", cookies)
		if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != "http://"+agentsHost+"/agents/planter/x/y?q=1" ||
			resp.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("%d Location %q Cache-Control %q, want 307 to the agents origin, not stored (a script's fetch of the URL is served here)",
				resp.StatusCode, resp.Header.Get("Location"), resp.Header.Get("Cache-Control"))
		}
		planted(t, resp)
		resp, _ = send(t, "GET", s.URL+"/agents/planter/x.js", "", "Sec-Fetch-Mode", "no-cors", "Sec-Fetch-Dest", "script", "Cookie", cookies)
		if resp.StatusCode != http.StatusTemporaryRedirect {
			t.Fatalf("a script element's request: %d, want 307 to the agents origin", resp.StatusCode)
		}
	})
	t.Run("dashboard origin, script", func(t *testing.T) {
		resp, body := send(t, "GET", s.URL+"/agents/planter/x", "", "Sec-Fetch-Mode", "cors", "Sec-Fetch-Dest", "empty", "Cookie", cookies)
		if resp.StatusCode != 200 || !strings.HasPrefix(body, "cookie: ") {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
		if got := resp.Header.Values("Set-Cookie"); len(got) > 0 {
			t.Errorf("Set-Cookie %q passed on the dashboard's origin; with an agents origin none may", got)
		}
	})
}

// TestAgentsOriginOwnListener: SLIPWAY_AGENTS_ADDR serves the agents
// origin on a listener of its own (another port: a browser sends it the
// dashboard host's cookies, which must not authenticate there).
func TestAgentsOriginOwnListener(t *testing.T) {
	agentsAddr := servertest.FreeAddr(t)
	s := apptest.New(t, map[string]string{"SLIPWAY_AGENTS_ADDR": agentsAddr})
	dep := servertest.EchoDeployment(t, s, "planter", cookiePlanter(t), nil)
	if u, _ := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["url"].(string); u != "http://"+agentsAddr+"/agents/planter" {
		t.Errorf("deployment url %q, want it on the agents listener", u)
	}
	cookies := signInCookies(t, s)
	resp, body := send(t, "GET", "http://"+agentsAddr+"/agents/planter/x", "", "X-Api-Key", s.Key)
	if resp.StatusCode != 200 {
		t.Fatalf("with a key: %d %s", resp.StatusCode, body)
	}
	for _, c := range resp.Header.Values("Set-Cookie") {
		if strings.Contains(c, "ATTACKER") {
			t.Errorf("a planted cookie passed: %q", c)
		}
	}
	if resp, body := send(t, "GET", "http://"+agentsAddr+"/agents/planter/x", "", "Cookie", cookies); resp.StatusCode != 401 {
		t.Errorf("with the dashboard's cookies: %d %s, want 401", resp.StatusCode, body)
	}
	if resp, _ := send(t, "GET", "http://"+agentsAddr+"/v2/deployments", "", "X-Api-Key", s.Key); resp.StatusCode != 404 {
		t.Errorf("the API on the agents listener: %d, want 404", resp.StatusCode)
	}
}

// TestDashboardOriginDropsSlipwayCookies: without an agents origin,
// every Slipway cookie a deployment answers under /agents/ is dropped,
// and its own cookies pass.
func TestDashboardOriginDropsSlipwayCookies(t *testing.T) {
	s := apptest.New(t, nil)
	servertest.EchoDeployment(t, s, "planter", cookiePlanter(t), nil)
	cookies := signInCookies(t, s)
	resp, body := send(t, "GET", s.URL+"/agents/planter/x", "", "Cookie", cookies, "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	got := resp.Header.Values("Set-Cookie")
	if !slices.Equal(got, []string{agentOwnCookie}) {
		t.Errorf("Set-Cookie %q, want only the deployment's own %q", got, agentOwnCookie)
	}
}
