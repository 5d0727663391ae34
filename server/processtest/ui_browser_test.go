package processtest_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"slipway/server/servertest"
)

// TestDeploymentUIInBrowser loads a deployment's generative UI component
// in headless Chromium from a page of another origin, as the SDK's
// LoadExternalComponent does: the official JS SDK's ~ui.getComponent
// (POST /ui/{graph} through the deployment URL, with the key), the HTML
// put in a shadow root, its script and stylesheet fetched without a
// credential from /ui-assets/..., the script's onload rendering the
// component through the page's component store, the stylesheet applying
// inside the shadow root. (The page stands in for React with a few lines:
// no React package is installed for the tests.)
func TestDeploymentUIInBrowser(t *testing.T) {
	chromium, node, e2e, sdkDir := corsBrowserTools(t)
	bundle := bundleSDK(t, sdkDir)
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/sdk.js":
			w.Header().Set("Content-Type", "text/javascript")
			_, _ = w.Write(bundle)
		default:
			w.Header().Set("Content-Type", "text/html")
			_, _ = fmt.Fprint(w, `<!doctype html><title>frontend</title><script src="/sdk.js"></script>`)
		}
	})
	front := httptest.NewServer(page)
	t.Cleanup(front.Close)
	_, port, err := net.SplitHostPort(strings.TrimPrefix(front.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	origin := "http://localhost:" + port // another origin than Slipway's 127.0.0.1

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
	s := servertest.Start(t, map[string]string{"SLIPWAY_CORS_ALLOW_ORIGINS": origin})
	servertest.EchoDeployment(t, s, "ui-browser", agent.URL, nil)

	cmd := exec.Command(node, filepath.Join(servertest.RepoRoot(), "server", "processtest", "testdata", "ui_browser.mjs"))
	cmd.Env = append(os.Environ(), "E2E="+e2e, "CHROMIUM="+chromium, "API="+s.URL+"/agents/ui-browser", "KEY="+s.Key, "PAGE="+origin)
	out, err := cmd.CombinedOutput()
	t.Logf("browser run:\n%s", out)
	if err != nil {
		t.Fatalf("the browser steps failed: %v", err)
	}
}
