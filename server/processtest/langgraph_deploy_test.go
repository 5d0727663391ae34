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

// langgraphCLI is the official deploy client, installed by .ci/run into
// testdata/langgraph-cli/.venv; without it the test fails in CI and skips
// elsewhere.
func langgraphCLI(t *testing.T) string {
	t.Helper()
	bin, _ := filepath.Abs(filepath.Join(servertest.RepoRoot(), "testdata", "langgraph-cli", ".venv", "bin", "langgraph"))
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("langgraph-cli is needed: python3 -m venv testdata/langgraph-cli/.venv && testdata/langgraph-cli/.venv/bin/pip install -r testdata/langgraph-cli/requirements.txt")
		}
		t.Skip("skipping: langgraph-cli is not installed in testdata/langgraph-cli/.venv (see .ci/run); under CI=true this fails instead")
	}
	return bin
}

// TestLangGraphDeploy drives `langgraph deploy` (langgraph-cli) against
// Slipway for a deployment that exists: the CLI finds it by name, uploads
// the project, PATCHes it in, polls the revision and reads its build logs;
// the revision must reach DEPLOYED and serve through the deployment URL.
// A broken project ends BUILD_FAILED, and the CLI says so and exits 1.
func TestLangGraphDeploy(t *testing.T) {
	longParallel(t)
	servertest.SkipShort(t, "a deploy with the official langgraph-cli")
	cli := langgraphCLI(t)
	requirePython311(t)
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "process"})
	// The CLI creates a missing deployment with source_revision_config
	// {}, which the spec refuses (graph_config_path is required): the
	// deployment is created once through the API, as README says.
	dep := createProject(t, s, "lg-deploy")

	project := t.TempDir()
	for name, body := range pyDeployFiles(t) {
		p := filepath.Join(project, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	deploy := func(args ...string) (string, error) {
		cmd := osexec.Command(cli, append([]string{"deploy", "--host-url", s.URL, "--api-key", s.Key, "--name", "lg-deploy",
			"--remote", "--no-input"}, args...)...)
		cmd.Dir = project
		// Nothing of the developer's environment (a LangSmith key) may
		// point the CLI elsewhere.
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LANGGRAPH_CLI_NO_ANALYTICS=1", "NO_COLOR=1"}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// A deployment the CLI would create: it sends source_revision_config
	// {}, which the spec refuses; the CLI shows Slipway's 422.
	out, err := deploy("--name", "lg-new")
	if err == nil || !strings.Contains(out, "POST /v2/deployments failed with status 422") || !strings.Contains(out, "graph_config_path") {
		t.Fatalf("creating through the CLI: %v\n%s", err, out)
	}

	start := time.Now()
	out, err = deploy("--verbose")
	if err != nil {
		t.Fatalf("langgraph deploy: %v\n%s\n%s", err, out, s.Logs())
	}
	t.Logf("langgraph deploy took %v:\n%s", time.Since(start).Round(time.Millisecond), out)
	revs := s.Do("GET", "/v2/deployments/"+dep+"/revisions", nil).Map()["resources"].([]any)
	latest := revs[0].(map[string]any)
	if latest["status"] != "DEPLOYED" {
		t.Fatalf("the CLI's revision: %v", latest)
	}
	for _, want := range []string{"Found existing deployment (ID: " + dep + ")", "Deployment successful!", "==> install the dependencies"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the CLI's output lacks %q:\n%s", want, out)
		}
	}
	// Each build log line once: the CLI pages with next_offset while the
	// build runs.
	if n := strings.Count(out, "==> install the dependencies"); n != 1 {
		t.Fatalf("the CLI showed the install step %d times:\n%s", n, out)
	}
	url, _ := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["url"].(string)
	if r := servertest.Do(t, "GET", url+"/ok", nil, "X-Api-Key", s.Key); r.Status != 200 {
		t.Fatalf("GET /ok through the deployment URL: %d", r.Status)
	}

	// A dependency that does not exist: BUILD_FAILED, and the CLI shows
	// the end of the build log, pip's complaint in it.
	pyproject := filepath.Join(project, "pyproject.toml")
	raw, _ := os.ReadFile(pyproject)
	if err := os.WriteFile(pyproject, []byte(strings.Replace(string(raw), `"langgraph==1.2.22",`, `"langgraph==1.2.22", "slipway-no-such-package==9.9.9",`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = deploy()
	if err == nil || !strings.Contains(out, "Last build log lines:") || !strings.Contains(out, "No matching distribution found for slipway-no-such-package==9.9.9") {
		t.Fatalf("a broken project: %v\n%s", err, out)
	}
	if r := servertest.Do(t, "GET", url+"/ok", nil, "X-Api-Key", s.Key); r.Status != 200 {
		t.Fatalf("the previous revision stopped serving: %d", r.Status)
	}
}
