package processtest_test

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"slipway/server/servertest"
)

// TestDeploymentUIThroughProxy: a deployment's generative UI through
// Slipway's URL. POST /agents/{name}/ui/{graph} needs a credential, as
// every deployment path does, and names its files at
// /ui-assets/{deployment_id}/... on the agents base; those answer without
// one (a page's <script> sends none), only for a deployment that exists
// and only the UI files; nothing of the caller's headers reaches the
// agent. With an agents origin they are there, and only there.
func TestDeploymentUIThroughProxy(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"langgraph.json": `{"graphs": {"echo": {"builtin": "echo"}}, "ui": {"echo": "./ui.jsx"}}`,
		"ui.jsx":         "import './ui.css';\nexport default { card: (p) => <b className=\"card\">{p.text}</b> };\n",
		"ui.css":         ".card { color: rgb(4, 5, 6) }\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	agent := servertest.StartAgent(t, map[string]string{"SLIPWAY_GRAPH_CONFIG": filepath.Join(dir, "langgraph.json")})
	for _, agents := range []bool{false, true} {
		name := "dashboard origin"
		if agents {
			name = "agents origin"
		}
		t.Run(name, func(t *testing.T) { uiThroughProxy(t, agent.URL, agents) })
	}
}

func uiThroughProxy(t *testing.T, agentURL string, agents bool) {
	addr := servertest.FreeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	env := map[string]string{"SLIPWAY_ADDR": addr}
	if agents {
		env["SLIPWAY_AGENTS_URL"] = "http://localhost:" + port
	}
	s := servertest.Start(t, env)
	dep := servertest.EchoDeployment(t, s, "ui", agentURL, nil)
	origin := s.URL // where the deployment's URL and its UI files are
	if agents {
		origin = env["SLIPWAY_AGENTS_URL"]
	}

	get := func(url string, header http.Header) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest("GET", url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header = header
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	post := func(key string) (int, string) {
		req, _ := http.NewRequest("POST", origin+"/agents/ui/ui/echo", strings.NewReader(`{"name": "card"}`))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("X-Api-Key", key)
		}
		// A caller cannot choose where the files are said to be.
		req.Header.Set("X-Slipway-Ui-Base", "https://evil.example")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, _ := post(""); status != http.StatusUnauthorized {
		t.Fatalf("POST /ui without a credential: %d; want 401", status)
	}
	status, html := post(s.Key)
	if status != 200 {
		t.Fatalf("POST /ui: %d %s", status, html)
	}
	base := origin + "/ui-assets/" + dep + "/ui/echo/"
	js := regexp.MustCompile(`<script src="([^"]+)"`).FindStringSubmatch(html)
	css := regexp.MustCompile(`<link rel="stylesheet" href="([^"]+)"`).FindStringSubmatch(html)
	if js == nil || css == nil || js[1] != base+"entrypoint.js" || css[1] != base+"entrypoint.css" {
		t.Fatalf("the HTML names its files elsewhere than %s:\n%s", base, html)
	}
	code, h, body := get(js[1], http.Header{"Cookie": {"slipway_session=x"}, "X-Api-Key": {"nothing"}})
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/javascript") || !strings.Contains(body, "__LGUI_echo") {
		t.Fatalf("the script without a credential: %d %s %.200s", code, h.Get("Content-Type"), body)
	}
	if h.Get("Content-Security-Policy") != "sandbox" || h.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("the script's headers: %v", h)
	}
	if code, _, body := get(css[1], nil); code != 200 || !strings.Contains(body, "rgb(4, 5, 6)") {
		t.Fatalf("the stylesheet: %d %s", code, body)
	}
	missing := []string{
		origin + "/ui-assets/" + dep + "/ui/echo/other.js",
		origin + "/ui-assets/" + dep + "/ui/nograph/entrypoint.js",
		origin + "/ui-assets/0199a1c2-0000-7000-8000-000000000001/ui/echo/entrypoint.js",
		origin + "/ui-assets/not-a-uuid/ui/echo/entrypoint.js",
		origin + "/ui-assets/" + dep + "/threads",
	}
	if agents {
		// Nothing of a deployment's on the dashboard's origin.
		missing = append(missing, s.URL+"/ui-assets/"+dep+"/ui/echo/entrypoint.js")
	}
	for _, u := range missing {
		if code, _, body := get(u, nil); code != 404 {
			t.Errorf("GET %s: %d %s; want 404", u, code, body)
		}
	}
}
