package servertest

import (
	"os"
	osexec "os/exec"
	"path/filepath"
	"testing"
)

// SDKSuiteDir holds the official SDK suites run against an agent or a
// deployment URL: agent.test.mjs (JS) and test_agent.py (Python), the
// same tests in each SDK.
func SDKSuiteDir() string {
	return filepath.Join(RepoRoot(), "runtime", "agent", "agentapi", "sdktest")
}

// SDKPython is the interpreter of the test virtualenv with the official
// Python SDK and pytest (SLIPWAY_TEST_PYTHON, else
// /opt/slipway-ci/venv/bin/python, which .ci/run makes from
// runtime/agent/hosts/py/e2e/requirements.txt). Without it the test skips,
// or fails under CI=true.
func SDKPython(t testing.TB) string {
	t.Helper()
	python := os.Getenv("SLIPWAY_TEST_PYTHON")
	if python == "" {
		python = "/opt/slipway-ci/venv/bin/python"
	}
	if out, err := osexec.Command(python, "-c", "import langgraph_sdk, pytest, pytest_asyncio").CombinedOutput(); err != nil {
		missing(t, "the official Python SDK suite needs a virtualenv with runtime/agent/hosts/py/e2e/requirements.txt "+
			"(.ci/run makes /opt/slipway-ci/venv; or set SLIPWAY_TEST_PYTHON): "+python+": "+err.Error()+"\n"+string(out))
	}
	return python
}

// RunPySDKSuite runs the official Python SDK suite (test_agent.py in
// SDKSuiteDir) against url, with key as the SDK's API key when not empty;
// it skips like SDKPython, and fails the test when a test of the suite
// fails, with pytest's report.
func RunPySDKSuite(t testing.TB, url, key string) {
	t.Helper()
	python := SDKPython(t)
	cmd := osexec.Command(python, "-m", "pytest", "-q", "-rA", "test_agent.py")
	cmd.Dir = SDKSuiteDir()
	cmd.Env = append(os.Environ(), "AGENT_URL="+url, "LANGGRAPH_API_KEY="+key)
	out, err := cmd.CombinedOutput()
	t.Logf("the Python SDK suite:\n%s", out)
	if err != nil {
		t.Fatalf("the Python SDK suite against %s failed: %v", url, err)
	}
}
