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

	"github.com/evanw/esbuild/pkg/api"

	"slipway/server/servertest"
)

// corsBrowserTools is servertest.Browser with the official JS SDK (the
// SDK test's packages), which the page bundles.
func corsBrowserTools(t *testing.T) (chromium, node, e2e, sdk string) {
	t.Helper()
	sdk = filepath.Join(servertest.RepoRoot(), "runtime", "agent", "agentapi", "sdktest")
	chromium, node, e2e = servertest.Browser(t, "the CORS browser test", [2]string{sdk, "@langchain/langgraph-sdk"})
	return chromium, node, e2e, sdk
}

// bundleSDK bundles the official JS SDK's Client for a browser page, as
// a frontend's build would, exposing it as the global LangGraphSDK.
func bundleSDK(t *testing.T, sdkDir string) []byte {
	t.Helper()
	res := api.Build(api.BuildOptions{
		Stdin:      &api.StdinOptions{Contents: `export { Client } from "@langchain/langgraph-sdk";`, ResolveDir: sdkDir, Loader: api.LoaderJS},
		Bundle:     true,
		Format:     api.FormatIIFE,
		GlobalName: "LangGraphSDK",
		Platform:   api.PlatformBrowser,
		Target:     api.ES2020,
		Write:      false,
	})
	if len(res.Errors) > 0 {
		t.Fatalf("bundle the SDK: %v", res.Errors)
	}
	return res.OutputFiles[0].Contents
}

// TestCORSBrowserSDK: a page served from another origin drives a
// deployment through its Slipway URL with the official JS SDK in headless
// Chromium, as LangSmith Studio or agent-chat-ui would: with the key it
// creates a thread and a run (the preflights answered before
// authentication); without the key it reads a 401; from an origin not in
// SLIPWAY_CORS_ALLOW_ORIGINS the browser blocks it.
func TestCORSBrowserSDK(t *testing.T) {
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
	// One page server, two origins: 127.0.0.1 (allowed) and localhost
	// (not), both on its port.
	front := httptest.NewServer(page)
	t.Cleanup(front.Close)
	_, port, err := net.SplitHostPort(strings.TrimPrefix(front.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	allowed, denied := "http://127.0.0.1:"+port, "http://localhost:"+port

	agent := servertest.StartAgent(t, nil) // the built-in echo graph
	s := servertest.Start(t, map[string]string{"SLIPWAY_CORS_ALLOW_ORIGINS": allowed})
	servertest.EchoDeployment(t, s, "browser-cors", agent.URL, nil)

	cmd := exec.Command(node, filepath.Join(servertest.RepoRoot(), "server", "processtest", "testdata", "cors_browser.mjs"))
	cmd.Env = append(os.Environ(), "E2E="+e2e, "CHROMIUM="+chromium, "API="+s.URL+"/agents/browser-cors", "KEY="+s.Key,
		"ALLOWED="+allowed, "DENIED="+denied)
	out, err := cmd.CombinedOutput()
	t.Logf("browser run:\n%s", out)
	if err != nil {
		t.Fatalf("the browser steps failed: %v", err)
	}
}
