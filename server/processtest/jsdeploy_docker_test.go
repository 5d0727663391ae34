package processtest_test

import (
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"slipway/server/servertest"
)

// requireDebootstrap skips (or, in CI, fails) without debootstrap, which
// builds Slipway's agent images on the docker runtime.
func requireDebootstrap(t *testing.T) { servertest.RequireDebootstrap(t) }

// TestJSProjectDocker is TestJSProjectOnProcessRuntime on the docker
// runtime: the TypeScript LangGraph.js project builds on the Node.js agent
// image (slipway-node, built locally on first need), its dependencies are
// installed with npm ci from its lock file into an image that a code-only
// change reuses, its build_command runs with the code, the graph answers
// the JS SDK through the deployment URL, and a revision whose graph
// cannot be imported ends DEPLOY_FAILED with the import error while the
// previous one serves.
func TestJSProjectDocker(t *testing.T) {
	longParallel(t)
	servertest.SkipShort(t, "a JavaScript project's build on docker")
	requireRuntime(t, "docker")
	requireDebootstrap(t)
	requireJSSDK(t)
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "docker"})
	d := s.Do("POST", "/v2/deployments", map[string]any{"name": "js-docker", "source": "internal_source",
		"source_config":          map[string]any{"build_command": `node -e "require('fs').writeFileSync('built.txt', 'built by ' + process.version)"`},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}, "secrets": []any{}})
	if d.Status != 201 {
		t.Fatalf("create: %d %s", d.Status, d.Body)
	}
	dep := d.Map()["id"].(string)
	logs := func(rev string) string { return phaseLogs(s, dep, rev) }
	files := projectFiles(t, filepath.Join(servertest.RepoRoot(), "testdata", "graphs", "js-deploy"))
	// An upload's node_modules stays out of the image: the lock file's install is what runs.
	files["node_modules/@langchain/langgraph/package.json"] = `{"name": "@langchain/langgraph", "version": "0.0.0-uploaded"}`
	rev1 := deploySource(t, s, dep, files)
	if st := waitPyRevision(t, s, dep, rev1, 15*time.Minute); st != "DEPLOYED" {
		t.Fatalf("revision 1 ended %s:\n%s\n%s", st, logs(rev1), s.Logs())
	}
	l1 := logs(rev1)
	for _, want := range []string{"slipway-node:20-", "installing its dependencies with npm ci (package-lock.json)", "==> install the dependencies into slipway-deps:", "added ", "<== install the dependencies done in", "<== build image done in"} {
		if !strings.Contains(l1, want) {
			t.Fatalf("build log of revision 1 lacks %q:\n%s", want, l1)
		}
	}
	inImage := func(rev, script string) string {
		t.Helper()
		out, err := osexec.Command("docker", "run", "--rm", "--network", "none", "--entrypoint", "/bin/sh", "slipway/"+dep+":"+rev, "-c", script).CombinedOutput()
		if err != nil {
			t.Fatalf("run revision %s's image: %v\n%s", rev, err, out)
		}
		return string(out)
	}
	if out := inImage(rev1, `cat /app/built.txt; echo; node -p 'require("/app/node_modules/@langchain/langgraph/package.json").version'`); !strings.Contains(out, "built by v20.") || !strings.Contains(out, "1.7.3") {
		t.Fatalf("revision 1's image: the build command's output and the installed langgraph:\n%s", out)
	}
	url, _ := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["url"].(string)
	sdk := func() { t.Helper(); jsSDKDeployed(t, s, url) }
	sdk()

	// A code-only change reuses the dependencies image.
	files["src/words.ts"] = files["src/words.ts"] + "\nexport const revision = 2;\n"
	rev2 := deploySource(t, s, dep, files)
	if st := waitPyRevision(t, s, dep, rev2, 5*time.Minute); st != "DEPLOYED" {
		t.Fatalf("revision 2 ended %s:\n%s", st, logs(rev2))
	}
	l2 := logs(rev2)
	if !strings.Contains(l2, "(same dependencies)") || strings.Contains(l2, "==> install the dependencies") {
		t.Fatalf("a code-only change installed again:\n%s", l2)
	}
	t.Logf("build log of the code-only change:\n%s", l2)
	if out := inImage(rev2, "cat /app/src/words.ts"); !strings.Contains(out, "revision = 2") {
		t.Fatalf("revision 2's image has revision 1's code:\n%s", out)
	}
	sdk()
	jsBrokenRevision(t, s, dep, rev2, files, sdk)
}
