package processtest_test

import (
	"os"
	osexec "os/exec"
	"path/filepath"
	"testing"

	"slipway/server/servertest"
)

// runSDKSuite runs the official SDK suites of runtime/agent/agentapi/sdktest
// against url (a deployment URL, the SDKs sending key as x-api-key): the
// JS SDK's (agent.test.mjs) and the Python SDK's (test_agent.py), the
// same tests in each SDK, one after the other on the same deployment.
// Each is a subtest that fails in CI and skips elsewhere when its SDK is
// missing; a failing suite ends the calling test.
func runSDKSuite(t *testing.T, url, key string) {
	t.Helper()
	if !t.Run("JS SDK suite", func(t *testing.T) { runJSSDKSuite(t, url, key) }) {
		t.FailNow()
	}
	if !t.Run("Python SDK suite", func(t *testing.T) { servertest.RunPySDKSuite(t, url, key) }) {
		t.FailNow()
	}
}

// runJSSDKSuite runs agent.test.mjs with node against url.
func runJSSDKSuite(t *testing.T, url, key string) {
	dir := servertest.SDKSuiteDir()
	_, nodeErr := osexec.LookPath("node")
	_, modErr := os.Stat(filepath.Join(dir, "node_modules", "@langchain", "langgraph-sdk"))
	if nodeErr != nil || modErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node and `npm ci` in runtime/agent/agentapi/sdktest are needed")
		}
		t.Skip("skipping the JS SDK suite through the proxy: node or its packages are missing")
	}
	cmd := osexec.Command("node", "--test", "agent.test.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "AGENT_URL="+url, "LANGGRAPH_API_KEY="+key)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("JS SDK suite through the proxy: %v\n%s", err, out)
	}
}
