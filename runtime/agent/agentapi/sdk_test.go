package agentapi_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"slipway/server/servertest"
)

// TestOfficialJSSDK runs sdktest/agent.test.mjs with node against a real
// `slipway agent`. Node and `npm ci` in sdktest are needed: CI must have
// them (the test fails there without them); elsewhere it skips.
func TestOfficialJSSDK(t *testing.T) {
	dir, _ := filepath.Abs("sdktest")
	_, nodeErr := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join(dir, "node_modules", "@langchain", "langgraph-sdk"))
	if nodeErr != nil || modErr != nil {
		msg := "node and `npm ci` in runtime/agent/agentapi/sdktest are needed for the JS SDK tests"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	// The built-in echo graph, and the counter command graph for the
	// human-in-the-loop test (echo never interrupts).
	a := servertest.StartAgent(t, map[string]string{"SLIPWAY_LOG_LEVEL": "warn", "SLIPWAY_GRAPH_CONFIG": counterApp(t, nil)})
	cmd := exec.Command("node", "--test", "--test-reporter=spec", "agent.test.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "AGENT_URL="+a.URL)
	out, err := cmd.CombinedOutput()
	t.Logf("node --test:\n%s", out)
	if err != nil {
		t.Fatalf("JS SDK tests failed: %v\nagent log:\n%s", err, a.Logs())
	}
}
