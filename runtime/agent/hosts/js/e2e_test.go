package js_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"slipway/server/servertest"
)

// needNode skips (or, in CI, fails) unless node and the npm packages of
// the example project and of the end-to-end suite are installed.
func needNode(t *testing.T) (project, suite string) {
	t.Helper()
	root := servertest.RepoRoot()
	project = filepath.Join(root, "testdata", "graphs", "js-agent")
	suite = filepath.Join(root, "runtime", "agent", "hosts", "js", "e2e")
	_, nodeErr := exec.LookPath("node")
	_, e1 := os.Stat(filepath.Join(project, "node_modules", "@langchain", "langgraph"))
	_, e2 := os.Stat(filepath.Join(suite, "node_modules", "@langchain", "langgraph-sdk"))
	if nodeErr != nil || e1 != nil || e2 != nil {
		msg := "node, and `npm ci` in testdata/graphs/js-agent and in runtime/agent/hosts/js/e2e, are needed for the JavaScript host tests"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return project, suite
}

// TestJSHostThroughSDK runs e2e/host.test.mjs with node: the official JS
// SDK against a real `slipway agent` serving testdata/graphs/js-agent.
func TestJSHostThroughSDK(t *testing.T) { runSuite(t, "host.test.mjs") }

// TestJSHostFidelity runs e2e/fidelity.test.mjs: the store from inside
// graphs, graph descriptions and schemas, subgraphs, every stream mode,
// resumable streams, interrupts and time travel on host graphs.
func TestJSHostFidelity(t *testing.T) { runSuite(t, "fidelity.test.mjs") }

func runSuite(t *testing.T, file string) {
	project, suite := needNode(t)
	a := servertest.StartAgent(t, map[string]string{"SLIPWAY_LOG_LEVEL": "warn", "SLIPWAY_GRAPH_CONFIG": filepath.Join(project, "langgraph.json")})
	args := []string{"--test", "--test-reporter=spec", "--test-concurrency=1"}
	if p := os.Getenv("JS_TEST_NAME_PATTERN"); p != "" {
		args = append(args, "--test-name-pattern="+p)
	}
	cmd := exec.Command("node", append(args, file)...)
	cmd.Dir = suite
	cmd.Env = append(os.Environ(), "AGENT_URL="+a.URL)
	out, err := cmd.CombinedOutput()
	t.Logf("node --test %s:\n%s", file, out)
	if err != nil {
		t.Fatalf("JS host tests failed: %v\nagent log:\n%s", err, a.Logs())
	}
}
