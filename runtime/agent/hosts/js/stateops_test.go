package js_test

import (
	"os/exec"
	"path/filepath"
	"testing"

	"slipway/server/servertest"
)

// TestJSHostStateOps runs e2e/stateops.test.mjs against a real `slipway
// agent` serving testdata/graphs/js-agent/stateops.json: a cancel recorded
// before it answers, supersteps on thread create, and updateState as a
// node of a graph a factory builds from the thread's config.
func TestJSHostStateOps(t *testing.T) {
	project, suite := needNode(t)
	a := servertest.StartAgent(t, map[string]string{"SLIPWAY_LOG_LEVEL": "warn", "SLIPWAY_GRAPH_CONFIG": filepath.Join(project, "stateops.json")})
	cmd := exec.Command("node", "--test", "--test-reporter=spec", "--test-concurrency=1", "stateops.test.mjs")
	cmd.Dir = suite
	cmd.Env = append(cmd.Environ(), "AGENT_URL="+a.URL)
	out, err := cmd.CombinedOutput()
	t.Logf("node --test stateops.test.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("JS state operation tests failed: %v\nagent log:\n%s", err, a.Logs())
	}
}
