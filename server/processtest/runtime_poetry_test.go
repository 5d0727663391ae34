package processtest_test

import (
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"slipway/server/servertest"
)

// requireUV is the directory of the uv that .ci/run installs beside the
// Python SDK (the test virtualenv's bin), or of uv on PATH; it skips (in
// CI, fails) without one.
func requireUV(t *testing.T) string {
	t.Helper()
	python := os.Getenv("SLIPWAY_TEST_PYTHON")
	if python == "" {
		python = "/opt/slipway-ci/venv/bin/python"
	}
	uv := filepath.Join(filepath.Dir(python), "uv")
	if _, err := os.Stat(uv); err != nil {
		if uv, err = osexec.LookPath("uv"); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("the pip_installer uv test needs uv in %s (.ci/run installs it) or on PATH", filepath.Dir(python))
			}
			t.Skipf("skipping: no uv in %s or on PATH; under CI=true this fails instead", filepath.Dir(python))
		}
	}
	return filepath.Dir(uv)
}

// TestPythonPoetryUV deploys a Poetry project (its dependencies only in
// [tool.poetry.dependencies], with caret constraints, an optional
// dependency and a dev group) that asks for pip_installer uv, on both
// runtimes: the build log shows uv installing the translated requirements,
// the graph answers the Python SDK through the deployment URL, and the
// optional and dev dependencies are not installed.
func TestPythonPoetryUV(t *testing.T) {
	longParallel(t)
	servertest.SkipShort(t, "a Poetry project's build")
	requirePython311(t)
	uvDir := requireUV(t)
	files := projectFiles(t, filepath.Join(servertest.RepoRoot(), "testdata", "graphs", "py-poetry"))
	// What the environment must and must not have: six (^1.16), not rich
	// (optional) nor pytest (dev group).
	probe := `import importlib.util as u, six; print("six", six.__version__, "rich", u.find_spec("rich") is not None, "pytest", u.find_spec("pytest") is not None)`
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			requireRuntime(t, driver)
			env := map[string]string{"SLIPWAY_RUNTIME": driver}
			if driver == "docker" {
				requireDebootstrap(t)
			} else {
				env["PATH"] = uvDir + string(os.PathListSeparator) + os.Getenv("PATH")
			}
			s := servertest.Start(t, env)
			d := s.Do("POST", "/v2/deployments", map[string]any{"name": "py-poetry", "source": "internal_source", "source_config": map[string]any{},
				"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}, "secrets": []any{}})
			if d.Status != 201 {
				t.Fatalf("create: %d %s", d.Status, d.Body)
			}
			dep := d.Map()["id"].(string)
			rev := deploySource(t, s, dep, files)
			if st := waitPyRevision(t, s, dep, rev, 15*time.Minute); st != "DEPLOYED" {
				t.Fatalf("ended %s:\n%s\n%s", st, phaseLogs(s, dep, rev), s.Logs())
			}
			l := phaseLogs(s, dep, rev)
			wants := map[string][]string{
				"process": {"installer uv", "uv pip install --python", "langgraph==1.2.22", "six>=1.16,<2", "<== install the dependencies done in"},
				"docker":  {`"/opt/uv/bin/uv","pip","install"`, "langgraph==1.2.22", "six>=1.16,<2", "<== install the dependencies done in"},
			}[driver]
			for _, want := range wants {
				if !strings.Contains(l, want) {
					t.Fatalf("build log lacks %q:\n%s", want, l)
				}
			}
			url, _ := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["url"].(string)
			if got := pySDKGreeting(t, url, s.Key, "Ada"); got != "hello from poetry, Ada" {
				t.Fatalf("the graph through the Python SDK answered %q", got)
			}
			var out []byte
			var err error
			if driver == "docker" {
				out, err = osexec.Command("docker", "run", "--rm", "--network", "none", "--entrypoint", "/venv/bin/python", "slipway/"+dep+":"+rev, "-c", probe).CombinedOutput()
			} else {
				out, err = osexec.Command(filepath.Join(s.DataDir, "deployments", dep, "revisions", rev, "venv", "bin", "python"), "-c", probe).CombinedOutput()
			}
			if err != nil || !strings.Contains(string(out), "six 1.") || !strings.Contains(string(out), "rich False pytest False") {
				t.Fatalf("the revision's environment: %v\n%s", err, out)
			}
		})
	}
}
