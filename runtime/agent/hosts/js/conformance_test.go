package js_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"slipway/server/servertest"
)

// TestJSCheckpointerConformance runs @langchain/langgraph-checkpoint-validation
// (e2e/checkpointer.spec.mjs, under vitest) against the JavaScript host's
// checkpointer in a real `slipway agent`: the agent serves
// testdata/graphs/js-agent/conformance.json, whose graph relays the host's
// saver on a Unix socket the suite calls.
func TestJSCheckpointerConformance(t *testing.T) {
	runJSConformance(t, nil)
}

// TestJSCheckpointerConformanceOnPostgres is the same suite against an
// agent keeping its state, the host's checkpoint rows included, in
// PostgreSQL (SLIPWAY_AGENT_POSTGRES_URL).
func TestJSCheckpointerConformanceOnPostgres(t *testing.T) {
	needNode(t)
	url := servertest.PostgresSchemaURL(t)
	runJSConformance(t, map[string]string{"SLIPWAY_AGENT_POSTGRES_URL": url})
	// The agent's state is in the database, not in a bbolt file: its
	// system assistant (the suite deletes the threads it wrote).
	if n := servertest.PostgresCount(t, url, "select count(*) from assistants"); n == 0 {
		t.Fatal("no assistant in PostgreSQL, want the agent's")
	}
}

// runJSConformance runs the suite against an agent started with env
// added to its own.
func runJSConformance(t *testing.T, env map[string]string) {
	project, suite := needNode(t)
	if _, err := os.Stat(filepath.Join(suite, "node_modules", "@langchain", "langgraph-checkpoint-validation")); err != nil {
		msg := "`npm ci` in runtime/agent/hosts/js/e2e is needed for the checkpointer conformance suite"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	// A short directory: a Unix socket path has at most 107 bytes.
	dir, err := os.MkdirTemp("", "cpv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "relay.sock")
	agentEnv := map[string]string{
		"SLIPWAY_LOG_LEVEL":        "warn",
		"SLIPWAY_GRAPH_CONFIG":     filepath.Join(project, "conformance.json"),
		"SLIPWAY_TEST_SAVER_RELAY": sock,
	}
	for k, v := range env {
		agentEnv[k] = v
	}
	a := servertest.StartAgent(t, agentEnv)
	report := filepath.Join(dir, "report.json")
	cmd := exec.Command(filepath.Join("node_modules", ".bin", "vitest"), "run",
		"--reporter=default", "--reporter=json", "--outputFile.json="+report)
	cmd.Dir = suite
	cmd.Env = append(os.Environ(), "SAVER_RELAY="+sock, "NO_COLOR=1")
	out, runErr := cmd.CombinedOutput()
	t.Logf("vitest:\n%s", out)
	raw, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("vitest wrote no report (%v): %v\nagent log:\n%s", runErr, err, a.Logs())
	}
	var r struct {
		Success bool `json:"success"`
		Total   int  `json:"numTotalTests"`
		Passed  int  `json:"numPassedTests"`
		Failed  int  `json:"numFailedTests"`
		Pending int  `json:"numPendingTests"`
		Todo    int  `json:"numTodoTests"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("vitest report: %v", err)
	}
	t.Logf("checkpointer conformance: %d tests, %d passed, %d failed, %d skipped", r.Total, r.Passed, r.Failed, r.Pending+r.Todo)
	if runErr != nil || !r.Success || r.Failed > 0 || r.Passed == 0 {
		t.Fatalf("checkpointer conformance failed (%v): %d of %d tests failed\nagent log:\n%s", runErr, r.Failed, r.Total, a.Logs())
	}
}
