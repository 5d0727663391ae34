package js_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"slipway/server/servertest"
)

// nodeSuite runs one SUITE of e2e/config.test.mjs against the agent at url.
func nodeSuite(t *testing.T, dir, url, suite string, env ...string) {
	t.Helper()
	cmd := exec.Command("node", "--test", "--test-reporter=spec", "--test-concurrency=1", "config.test.mjs")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "AGENT_URL="+url, "SUITE="+suite), env...)
	out, err := cmd.CombinedOutput()
	t.Logf("node --test (SUITE=%s):\n%s", suite, out)
	if err != nil {
		t.Fatalf("SUITE=%s failed: %v", suite, err)
	}
}

// TestJSHostConfiguration drives testdata/graphs/js-agent/configured.json
// through the official SDK: graph factories, the project's env file and
// LANGGRAPH_CONFIG, runtime context, assistants per graph, custom routes
// (a Hono app), and API details (name search, after_seconds, Last-Event-ID
// -1, missing store items).
func TestJSHostConfiguration(t *testing.T) {
	project, suite := needNode(t)
	a := servertest.StartAgent(t, map[string]string{"SLIPWAY_LOG_LEVEL": "warn", "SLIPWAY_GRAPH_CONFIG": filepath.Join(project, "configured.json"),
		"SLIPWAY_AGENT_MAX_BODY_MB": "2"})
	nodeSuite(t, suite, a.URL, "config")
	uploadOverLimit(t, a.URL+"/custom/upload/too-large")
	if t.Failed() {
		t.Logf("agent log:\n%s", a.Logs())
	}
}

// uploadOverLimit sends a chunked 3 MiB body to a custom route of an
// agent whose SLIPWAY_AGENT_MAX_BODY_MB is 2: the app reads it as it
// streams, and the answer is 413 however the app took the cut-off body.
func uploadOverLimit(t *testing.T, url string) {
	t.Helper()
	pr, pw := io.Pipe()
	go func() {
		chunk := bytes.Repeat([]byte{1}, 64<<10)
		for range 48 {
			if _, err := pw.Write(chunk); err != nil {
				return // the agent answered and stopped reading
			}
		}
		pw.Close()
	}()
	req, err := http.NewRequest("POST", url, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = -1 // chunked: the limit is found while streaming
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("upload over the limit: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	pr.CloseWithError(io.ErrClosedPipe)
	var body struct {
		Detail string `json:"detail"`
	}
	if resp.StatusCode != http.StatusRequestEntityTooLarge || json.Unmarshal(raw, &body) != nil || body.Detail == "" {
		t.Fatalf("upload over the limit: %d %s; want 413 with a detail", resp.StatusCode, raw)
	}
}

// TestJSHostSurvivesAgentRestart kills `slipway agent` (SIGKILL) while a
// host graph's thread waits at interrupt(), starts it again on the same
// data directory, and resumes the interrupt.
func TestJSHostSurvivesAgentRestart(t *testing.T) {
	project, suite := needNode(t)
	a := servertest.StartAgent(t, map[string]string{"SLIPWAY_LOG_LEVEL": "warn", "SLIPWAY_GRAPH_CONFIG": filepath.Join(project, "langgraph.json")})
	file := filepath.Join(t.TempDir(), "before.json")
	nodeSuite(t, suite, a.URL, "restart-before", "RESTART_FILE="+file)
	a.Kill()
	a.Restart()
	nodeSuite(t, suite, a.URL, "restart-after", "RESTART_FILE="+file)
	if t.Failed() {
		t.Logf("agent log:\n%s", a.Logs())
	}
}
