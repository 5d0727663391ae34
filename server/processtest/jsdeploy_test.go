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

// projectFiles reads a testdata project into an upload's files, without
// what a build makes (node_modules, __pycache__).
func projectFiles(t testing.TB, dir string) map[string]string { return servertest.ProjectFiles(t, dir) }

func revisionLogs(t *testing.T, s *servertest.Server, dep, rev, phase string) string {
	t.Helper()
	var out strings.Builder
	r := s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev+"/logs?phase="+phase, nil)
	logs, _ := r.Map()["logs"].([]any)
	for _, l := range logs {
		m, _ := l.(map[string]any)
		out.WriteString(strings.TrimRight(m["message"].(string), "\n") + "\n")
	}
	return out.String()
}

func jsSuite() string { return servertest.JSSuite() }

func requireJSSDK(t *testing.T) { servertest.RequireJSSDK(t) }

// jsSDKDeployed runs the JS SDK's "deployed" scenarios (the js-deploy
// project's graph) through a deployment URL.
func jsSDKDeployed(t *testing.T, s *servertest.Server, url string) {
	t.Helper()
	cmd := osexec.Command("node", "--test", "--test-reporter=spec", "config.test.mjs")
	cmd.Dir = jsSuite()
	cmd.Env = append(os.Environ(), "AGENT_URL="+url, "LANGGRAPH_API_KEY="+s.Key, "SUITE=deployed")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the JS SDK through the deployment URL: %v\n%s\nserver log:\n%s", err, out, s.Logs())
	}
}

// TestJSProjectOnProcessRuntime is issue 9's acceptance 4: a TypeScript
// LangGraph.js project with a package.json and a lock file is uploaded to
// a real `slipway serve` on the process runtime, built (npm ci from the
// registry), DEPLOYED and run through the deployment URL with the JS SDK;
// a PATCH to a revision whose graph cannot be imported ends DEPLOY_FAILED
// with the import error in its deploy log while the first keeps serving.
func TestJSProjectOnProcessRuntime(t *testing.T) {
	longParallel(t)
	root := servertest.RepoRoot()
	requireJSSDK(t)
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "process"})
	dep := createProject(t, s, "js-project")
	files := projectFiles(t, filepath.Join(root, "testdata", "graphs", "js-deploy"))
	rev1 := deploySource(t, s, dep, files)
	if st := waitPyRevision(t, s, dep, rev1, 5*time.Minute); st != "DEPLOYED" {
		t.Fatalf("revision 1 ended %s:\n%s\n%s", st, revisionLogs(t, s, dep, rev1, "build,deploy,agent"), s.Logs())
	}
	build := revisionLogs(t, s, dep, rev1, "build")
	for _, want := range []string{"node_version 20: this host runs node v", "installing its dependencies with npm ci (package-lock.json)", "added "} {
		if !strings.Contains(build, want) {
			t.Fatalf("build log lacks %q:\n%s", want, build)
		}
	}
	url, _ := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["url"].(string)
	sdk := func() { t.Helper(); jsSDKDeployed(t, s, url) }
	sdk()

	jsBrokenRevision(t, s, dep, rev1, files, sdk)
}

// jsBrokenRevision deploys a revision of the js-deploy project whose graph
// imports a package that is not installed: it must end DEPLOY_FAILED with
// the import error in its deploy log, while rev1 keeps serving (sdk).
func jsBrokenRevision(t *testing.T, s *servertest.Server, dep, rev1 string, files map[string]string, sdk func()) {
	t.Helper()
	// A revision whose graph imports a package that is not installed.
	broken := map[string]string{}
	for k, v := range files {
		broken[k] = v
	}
	broken["src/agent.ts"] = "import { nothing } from \"not-an-installed-package\";\n" + files["src/agent.ts"] + "\nexport const unused = nothing;\n"
	rev2 := deploySource(t, s, dep, broken)
	if st := waitPyRevision(t, s, dep, rev2, 5*time.Minute); st != "DEPLOY_FAILED" {
		t.Fatalf("broken revision ended %s:\n%s", st, revisionLogs(t, s, dep, rev2, "build,deploy,agent"))
	}
	deploy := revisionLogs(t, s, dep, rev2, "deploy")
	for _, want := range []string{`graph "agent" (./src/agent.ts:graph) failed to load`, "not-an-installed-package"} {
		if !strings.Contains(deploy, want) {
			t.Fatalf("deploy log of the broken revision lacks %q:\n%s", want, deploy)
		}
	}
	t.Logf("deploy log of the broken revision:\n%s", deploy)
	// The first revision still serves.
	sdk()
	if got := s.Do("GET", "/v2/deployments/"+dep, nil).Map(); got["active_revision_id"] != rev1 {
		t.Fatalf("deployment after the failed revision: active %v, want %s", got["active_revision_id"], rev1)
	}
}
