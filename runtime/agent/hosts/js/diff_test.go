package js_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"slipway/server/servertest"
)

// TestJSHostMatchesReference runs diff/diff.test.mjs: the same calls
// through the official JS SDK against the reference JavaScript server
// (@langchain/langgraph-api run by `langgraphjs dev`) and against a real
// `slipway agent`, both serving testdata/graphs/js-agent/diff.json, and
// compares what a client sees; it fails on any difference that
// diff/allowlist.mjs (and the README) does not list.
func TestJSHostMatchesReference(t *testing.T) {
	servertest.SkipShort(t, "the differential test against the reference JavaScript server")
	project, _ := needNode(t)
	diffDir := filepath.Join(servertest.RepoRoot(), "runtime", "agent", "hosts", "js", "diff")
	if _, err := os.Stat(filepath.Join(diffDir, "node_modules", ".bin", "langgraphjs")); err != nil {
		msg := "`npm ci` in runtime/agent/hosts/js/diff is needed for the differential test against the reference server"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	config := filepath.Join(project, "diff.json")
	refURL := startReference(t, diffDir, project, config)
	a := servertest.StartAgent(t, map[string]string{"SLIPWAY_LOG_LEVEL": "warn", "SLIPWAY_GRAPH_CONFIG": config})

	cmd := exec.Command("node", "--test", "--test-reporter=spec", "--test-concurrency=1", "diff.test.mjs")
	cmd.Dir = diffDir
	cmd.Env = append(os.Environ(), "AGENT_URL="+a.URL, "REFERENCE_URL="+refURL, "DIFF_VERBOSE=1")
	out, err := cmd.CombinedOutput()
	t.Logf("node --test:\n%s", out)
	if err != nil {
		t.Fatalf("slipway differs from the reference server: %v\nagent log:\n%s", err, a.Logs())
	}
}

// startReference runs the reference development server on the project's
// graphs. It runs from a scratch directory that links the project's
// sources and node_modules, because the dev server writes its state
// (.langgraph_api) and a .gitignore beside its configuration.
func startReference(t *testing.T, diffDir, project, config string) string {
	t.Helper()
	scratch := t.TempDir()
	for _, name := range []string{"src", "node_modules", "package.json"} {
		if err := os.Symlink(filepath.Join(project, name), filepath.Join(scratch, name)); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(scratch, "langgraph.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := servertest.FreeAddr(t)
	port := addr[strings.LastIndex(addr, ":")+1:]
	cmd := exec.Command(filepath.Join(diffDir, "node_modules", ".bin", "langgraphjs"), "dev",
		"--port", port, "--host", "127.0.0.1", "--no-browser", "--config", filepath.Join(scratch, "langgraph.json"))
	cmd.Dir = diffDir
	cmd.Env = append(os.Environ(), "LANGSMITH_TRACING=false", "LANGCHAIN_TRACING_V2=false", "NO_COLOR=1")
	return servertest.StartReference(t, cmd, port, 90*time.Second)
}
