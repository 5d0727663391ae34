package py_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"slipway/server/servertest"
)

// refVenvEnv names the virtualenv with the reference Python server
// (diff/requirements.txt); .ci/run makes /opt/slipway-ci/ref-venv.
const refVenvEnv = "SLIPWAY_TEST_REF_VENV"

// TestPyHostMatchesReference runs diff/test_diff.py: the same calls
// through the official Python SDK against the reference Python server
// (langgraph-api run by `langgraph dev`) and against a real `slipway
// agent`, both serving testdata/graphs/py-agent/diff.json, and compares
// what a client sees; it fails on any difference that diff/allowlist.py
// (and the README) does not list.
func TestPyHostMatchesReference(t *testing.T) {
	servertest.SkipShort(t, "the differential test against the reference Python server")
	python, project, _ := needPython(t)
	venv := os.Getenv(refVenvEnv)
	if venv == "" {
		venv = "/opt/slipway-ci/ref-venv"
	}
	langgraph := filepath.Join(venv, "bin", "langgraph")
	if _, err := os.Stat(langgraph); err != nil {
		msg := "the differential test needs the reference server: a virtualenv with runtime/agent/hosts/py/diff/requirements.txt " +
			"(.ci/run makes /opt/slipway-ci/ref-venv; or set " + refVenvEnv + ")"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	diffDir := filepath.Join(servertest.RepoRoot(), "runtime", "agent", "hosts", "py", "diff")
	config := filepath.Join(project, "diff.json")
	refURL := startPyReference(t, langgraph, project, config)
	a := servertest.StartAgent(t, map[string]string{
		"SLIPWAY_LOG_LEVEL":    "warn",
		"SLIPWAY_GRAPH_CONFIG": config,
		"SLIPWAY_AGENT_PYTHON": python,
	})

	args := []string{"-m", "pytest", "-v", "-p", "no:cacheprovider", "test_diff.py"}
	if k := os.Getenv("PY_TEST_K"); k != "" {
		args = append(args, "-k", k)
	}
	cmd := exec.Command(python, args...)
	cmd.Dir = diffDir
	cmd.Env = append(os.Environ(), "AGENT_URL="+a.URL, "REFERENCE_URL="+refURL, "DIFF_VERBOSE=1")
	out, err := cmd.CombinedOutput()
	t.Logf("pytest:\n%s", out)
	if err != nil {
		t.Fatalf("slipway differs from the reference server: %v\nagent log:\n%s", err, a.Logs())
	}
}

// startPyReference runs the reference development server on the project's
// graphs. It runs in a scratch directory that links the project's files,
// because `langgraph dev` resolves graphs and dependencies against its
// working directory and writes its state (.langgraph_api) there.
func startPyReference(t *testing.T, langgraph, project, config string) string {
	t.Helper()
	scratch := t.TempDir()
	entries, err := os.ReadDir(project)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || e.Name() == "__pycache__" {
			continue
		}
		if err := os.Symlink(filepath.Join(project, e.Name()), filepath.Join(scratch, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(scratch, "langgraph.diff.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := servertest.FreeAddr(t)
	port := addr[strings.LastIndex(addr, ":")+1:]
	cmd := exec.Command(langgraph, "dev", "--port", port, "--host", "127.0.0.1", "--no-browser", "--no-reload",
		"--config", "langgraph.diff.json")
	cmd.Dir = scratch
	// Tracing off: the in-memory server then needs no licence key and
	// sends nothing anywhere.
	cmd.Env = append(os.Environ(), "LANGSMITH_TRACING=false", "LANGCHAIN_TRACING_V2=false", "LANGSMITH_API_KEY=",
		"NO_COLOR=1", "PYTHONDONTWRITEBYTECODE=1")
	return servertest.StartReference(t, cmd, port, 120*time.Second)
}
