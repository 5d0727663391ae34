package processtest_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"slipway/server/servertest"
)

// TestDeploymentDocsInBrowser opens a deployment's API reference, its
// URL + /docs, in headless Chromium: before sign-in it is refused (401);
// signed in to the dashboard it renders (the operations in the DOM, its
// stylesheet applied under its Content-Security-Policy) and its link to
// the document opens. On the dashboard's origin alone, and with an agents
// origin (SLIPWAY_AGENTS_URL, localhost on the same listener: another
// origin to the browser), where the deployment's URL points and which
// takes no cookie.
func TestDeploymentDocsInBrowser(t *testing.T) {
	chromium, node, e2e := servertest.Browser(t, "the deployment docs browser test")
	agent := servertest.StartAgent(t, nil) // the built-in echo graph
	for _, tc := range []struct {
		name   string
		agents bool
	}{{"dashboard origin", false}, {"agents origin", true}} {
		t.Run(tc.name, func(t *testing.T) {
			addr := servertest.FreeAddr(t)
			_, port, _ := net.SplitHostPort(addr)
			env := map[string]string{"SLIPWAY_ADDR": addr}
			if tc.agents {
				env["SLIPWAY_AGENTS_URL"] = "http://localhost:" + port
			}
			s := servertest.Start(t, env)
			dep := servertest.EchoDeployment(t, s, "docs", agent.URL, nil)
			url, _ := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["url"].(string)
			if url == "" {
				t.Fatal("the deployment has no url")
			}
			cmd := exec.Command(node, filepath.Join(servertest.RepoRoot(), "server", "processtest", "testdata", "docs_browser.mjs"))
			cmd.Env = append(os.Environ(), "E2E="+e2e, "CHROMIUM="+chromium, "BASE="+s.URL, "KEY="+s.Key, "DOCS="+url+"/docs", "AGENTS="+env["SLIPWAY_AGENTS_URL"])
			out, err := cmd.CombinedOutput()
			t.Logf("browser run:\n%s", out)
			if err != nil {
				t.Fatalf("the browser steps failed: %v", err)
			}
		})
	}
}
