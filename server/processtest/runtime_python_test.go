package processtest_test

import (
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"slipway/server/servertest"
)

// pyDeployFiles is testdata/graphs/py-deploy as a source archive's files.
func pyDeployFiles(t testing.TB) map[string]string {
	t.Helper()
	return projectFiles(t, filepath.Join(servertest.RepoRoot(), "testdata", "graphs", "py-deploy"))
}

// phaseLogs is a revision's build and deploy log, a "phase: message" line
// an entry.
func phaseLogs(s *servertest.Server, dep, rev string) string {
	var b strings.Builder
	entries, _ := s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev+"/logs", nil).Map()["logs"].([]any)
	for _, e := range entries {
		m, _ := e.(map[string]any)
		fmt.Fprintf(&b, "%v: %v\n", m["phase"], m["message"])
	}
	return b.String()
}

// requirePython311 skips (or, in CI, fails) when the host has no Python
// 3.11 with venv that every uid may run, which the test project asks for.
func requirePython311(t *testing.T) { servertest.RequirePython311(t) }

// pySDKGreeting runs the deployment's "agent" graph through the official
// Python SDK (langgraph-sdk, in the test virtualenv .ci/run makes) at the
// deployment URL: a streamed run on a new thread, then that thread's state.
func pySDKGreeting(t *testing.T, url, key, name string) string {
	t.Helper()
	python := os.Getenv("SLIPWAY_TEST_PYTHON")
	if python == "" {
		python = "/opt/slipway-ci/venv/bin/python"
	}
	if err := osexec.Command(python, "-c", "import langgraph_sdk").Run(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the Python SDK is not installed in %s (.ci/run makes it): %v", python, err)
		}
		t.Skipf("skipping: the Python SDK is not installed in %s (or set SLIPWAY_TEST_PYTHON); under CI=true this fails instead", python)
	}
	script := `
import asyncio, sys
from langgraph_sdk import get_client

async def main(url, key, name):
    client = get_client(url=url, api_key=key)
    thread = await client.threads.create()
    broke = "cleanly"
    try:
        events = [c.event async for c in client.runs.stream(thread["thread_id"], "agent", input={"name": name}, stream_mode="values")]
    except Exception as err:  # the stream broken off before its end
        events, broke = [], repr(err)
    if not events:
        run = (await client.runs.list(thread["thread_id"]))[0]
        print("the stream ended without an event (" + broke + "); the run is", run["status"], run)
        sys.exit(3)
    assert events[0] == "metadata" and "values" in events, events
    state = await client.threads.get_state(thread["thread_id"])
    print(state["values"]["greeting"])

asyncio.run(main(*sys.argv[1:]))
`
	// No retry: a stream that broke right after a deploy was a proxy bug
	// (fixed, with TestRelayIsFullDuplex); one now fails and says why.
	out, err := osexec.Command(python, "-c", script, url, key, name).CombinedOutput()
	if err != nil {
		t.Fatalf("the Python SDK through %s: %v\n%s", url, err, out)
	}
	return strings.TrimSpace(string(out))
}

// createProject creates an internal_source deployment of the project at
// langgraph.json, with no secrets, and returns its id.
func createProject(t testing.TB, s *servertest.Server, name string) string {
	t.Helper()
	d := s.Do("POST", "/v2/deployments", map[string]any{"name": name, "source": "internal_source", "source_config": map[string]any{},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}, "secrets": []any{}})
	if d.Status != 201 {
		t.Fatalf("create: %d %s", d.Status, d.Body)
	}
	return d.Map()["id"].(string)
}

// waitPyRevision is waitStatus with room for a dependency install (pip's
// or npm's).
func waitPyRevision(t testing.TB, s *servertest.Server, dep, rev string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		st, _ := s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev, nil).Map()["status"].(string)
		switch st {
		case "DEPLOYED", "BUILD_FAILED", "DEPLOY_FAILED", "CREATE_FAILED", "SKIPPED":
			return st
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("revision %s did not finish within %v", rev, within)
	return ""
}

// TestPythonProjectProcess builds a real Python project on the process
// runtime: its pyproject.toml dependencies (langgraph from PyPI) go into
// the revision's own virtual environment with the python_version it asks
// for, the agent starts with that environment, a code-only change reuses
// it, and a revision whose dependency cannot be installed, or whose
// python_version the host lacks, ends BUILD_FAILED with the reason in its
// logs while the previous revision keeps serving.
func TestPythonProjectProcess(t *testing.T) {
	longParallel(t)
	requirePython311(t)
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "process"})
	dep := createProject(t, s, "py-deploy")
	logs := func(rev string) string { return phaseLogs(s, dep, rev) }
	files := pyDeployFiles(t)
	rev1 := deploySource(t, s, dep, files)
	if st := waitPyRevision(t, s, dep, rev1, 5*time.Minute); st != "DEPLOYED" {
		t.Fatalf("revision 1 ended %s:\n%s\n%s", st, logs(rev1), s.Logs())
	}
	l1 := logs(rev1)
	for _, want := range []string{"Python 3.11.", "==> create the virtual environment", "==> install the dependencies", "langgraph==1.2.22", "<== install the dependencies done in"} {
		if !strings.Contains(l1, want) {
			t.Fatalf("build log of revision 1 lacks %q:\n%s", want, l1)
		}
	}
	url, _ := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["url"].(string)
	ok := func() int { return servertest.Do(t, "GET", url+"/ok", nil, "X-Api-Key", s.Key).Status }
	if st := ok(); st != 200 {
		t.Fatalf("GET /ok through the deployment URL: %d", st)
	}
	// The agent's Python host serves the graph with the revision's
	// environment, and the project's env reaches its nodes.
	if got := pySDKGreeting(t, url, s.Key, "Ada"); got != "hello from langgraph.json, Ada" {
		t.Fatalf("the graph through the Python SDK answered %q", got)
	}
	// The revision's environment has the project's dependency and its own
	// package on the path, and is the interpreter the agent was told of.
	venvPython := func(rev string) string {
		return filepath.Join(s.DataDir, "deployments", dep, "revisions", rev, "venv", "bin", "python")
	}
	imp := `import langgraph.graph, py_deploy.agent as a, sys; print(a.graph.invoke({"name": "x"})["greeting"], sys.prefix)`
	out, err := osexec.Command(venvPython(rev1), "-c", imp).CombinedOutput()
	if err != nil || !strings.Contains(string(out), ", x "+filepath.Join(s.DataDir, "deployments", dep, "revisions", rev1, "venv")) {
		t.Fatalf("the revision's environment: %v\n%s", err, out)
	}
	hashFile := filepath.Join(s.DataDir, "deployments", dep, "revisions", rev1, "venv.hash")
	built, err := os.Stat(hashFile)
	if err != nil {
		t.Fatal(err)
	}
	agentEnv := agentEnviron(t, dep)
	if agentEnv["SLIPWAY_AGENT_PYTHON"] != venvPython(rev1) || agentEnv["PY_DEPLOY_GREETING"] != "hello from langgraph.json" {
		t.Fatalf("the agent's environment: SLIPWAY_AGENT_PYTHON=%q PY_DEPLOY_GREETING=%q", agentEnv["SLIPWAY_AGENT_PYTHON"], agentEnv["PY_DEPLOY_GREETING"])
	}

	// A code-only change: the same dependencies, so the environment is reused.
	files["py_deploy/agent.py"] = strings.Replace(files["py_deploy/agent.py"], `f"{prefix}, `, `f"{prefix}! `, 1)
	rev2 := deploySource(t, s, dep, files)
	if st := waitPyRevision(t, s, dep, rev2, 2*time.Minute); st != "DEPLOYED" {
		t.Fatalf("revision 2 ended %s:\n%s", st, logs(rev2))
	}
	if l := logs(rev2); !strings.Contains(l, "(same dependencies)") || strings.Contains(l, "==> install the dependencies") {
		t.Fatalf("a code-only change installed again:\n%s", l)
	}
	out, err = osexec.Command(venvPython(rev2), "-c", imp).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "hello! x "+filepath.Join(s.DataDir, "deployments", dep, "revisions", rev2, "venv")) {
		t.Fatalf("revision 2's environment runs revision 1's code: %v\n%s", err, out)
	}
	if got := pySDKGreeting(t, url, s.Key, "Ada"); got != "hello from langgraph.json! Ada" {
		t.Fatalf("revision 2 through the Python SDK answered %q", got)
	}
	// Revision 2 shares revision 1's packages, not its code: nothing of
	// revision 1's source is on its path, and no error is printed on start.
	out, err = osexec.Command(venvPython(rev2), "-c", "import sys; print(sys.path)").CombinedOutput()
	rev1App := filepath.Join(s.DataDir, "deployments", dep, "revisions", rev1, "app")
	if err != nil || strings.Contains(string(out), rev1App) || !strings.Contains(string(out), filepath.Join(rev1, "venv", "lib")) || strings.Contains(string(out), "Error") {
		t.Fatalf("revision 2's path: %v\n%s", err, out)
	}

	// Failures: each ends BUILD_FAILED with why, and revision 2 serves on.
	broken := func(name, want string, change func(map[string]string)) {
		t.Run(name, func(t *testing.T) {
			bad := map[string]string{}
			for k, v := range files {
				bad[k] = v
			}
			change(bad)
			rev := deploySource(t, s, dep, bad)
			if st := waitPyRevision(t, s, dep, rev, 3*time.Minute); st != "BUILD_FAILED" {
				t.Fatalf("ended %s, want BUILD_FAILED:\n%s", st, logs(rev))
			}
			if l := logs(rev); !strings.Contains(l, want) {
				t.Fatalf("logs lack %q:\n%s", want, l)
			}
			if st := ok(); st != 200 {
				t.Fatalf("the previous revision stopped serving: %d", st)
			}
			if got := agentEnviron(t, dep)["SLIPWAY_AGENT_PYTHON"]; got != venvPython(rev2) {
				t.Fatalf("serving %q, want revision 2's", got)
			}
		})
	}
	broken("missing dependency", "slipway-no-such-package", func(f map[string]string) {
		f["pyproject.toml"] = strings.Replace(f["pyproject.toml"], `"langgraph==1.2.22",`, `"langgraph==1.2.22", "slipway-no-such-package==9.9.9",`, 1)
	})
	broken("python version", "python_version 3.15 is not installed on this host", func(f map[string]string) {
		f["langgraph.json"] = strings.Replace(f["langgraph.json"], `"3.11"`, `"3.15"`, 1)
	})
	// A graph that fails to import builds (its dependencies are fine) and
	// ends DEPLOY_FAILED with the loader's message; revision 2 serves on.
	t.Run("import error", func(t *testing.T) {
		bad := map[string]string{}
		for k, v := range files {
			bad[k] = v
		}
		bad["py_deploy/agent.py"] = "import slipway_not_installed_module\n" + bad["py_deploy/agent.py"]
		rev := deploySource(t, s, dep, bad)
		if st := waitPyRevision(t, s, dep, rev, 3*time.Minute); st != "DEPLOY_FAILED" {
			t.Fatalf("ended %s, want DEPLOY_FAILED:\n%s", st, logs(rev))
		}
		if l := logs(rev); !strings.Contains(l, "No module named 'slipway_not_installed_module'") {
			t.Fatalf("logs lack the import error:\n%s", l)
		}
		if got := pySDKGreeting(t, url, s.Key, "Bo"); got != "hello from langgraph.json! Bo" {
			t.Fatalf("revision 2 after the failed one answered %q", got)
		}
	})

	// A rollback to revision 1 starts it from its build, kept on disk: the
	// same environment, not a new one.
	if r := s.Do("POST", "/v2/deployments/"+dep+"/revisions/"+rev1+"/redeploy", nil); r.Status >= 300 {
		t.Fatalf("redeploy: %d %s", r.Status, r.Body)
	}
	for deadline := time.Now().Add(time.Minute); findAgentEnviron(dep)["SLIPWAY_AGENT_PYTHON"] != venvPython(rev1); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("revision 1 is not serving again:\n%s", logs(rev1))
		}
	}
	if st := waitPyRevision(t, s, dep, rev1, time.Minute); st != "DEPLOYED" {
		t.Fatalf("the rollback ended %s:\n%s", st, logs(rev1))
	}
	again, err := os.Stat(hashFile)
	if err != nil || !os.SameFile(built, again) || !again.ModTime().Equal(built.ModTime()) {
		t.Fatalf("revision 1 was built again for the rollback: %v", err)
	}
	if st := ok(); st != 200 {
		t.Fatalf("GET /ok after the rollback: %d", st)
	}
}

// agentEnviron is the environment of the deployment's running agent
// (`slipway agent` with SLIPWAY_AGENT_DATA_DIR under the deployment).
func agentEnviron(t *testing.T, dep string) map[string]string {
	t.Helper()
	env := findAgentEnviron(dep)
	if env == nil {
		t.Fatalf("no agent process of deployment %s", dep)
	}
	return env
}

// findAgentEnviron is agentEnviron, nil when no agent runs (a handover).
func findAgentEnviron(dep string) map[string]string {
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		env := map[string]string{}
		for _, kv := range strings.Split(string(raw), "\x00") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				env[k] = v
			}
		}
		if strings.Contains(env["SLIPWAY_AGENT_DATA_DIR"], string(filepath.Separator)+dep+string(filepath.Separator)) {
			return env
		}
	}
	return nil
}

// TestPythonProjectDocker is TestPythonProjectProcess on the docker
// runtime: the Python agent image is built locally from Debian packages
// on first need (its root filesystem cached in SLIPWAY_IMAGE_CACHE), the
// dependencies go into an image of their own that a code-only change
// reuses, and a missing dependency ends BUILD_FAILED while the previous
// revision serves.
func TestPythonProjectDocker(t *testing.T) {
	longParallel(t)
	servertest.SkipShort(t, "a Python project's build on docker")
	requireRuntime(t, "docker")
	requireDebootstrap(t)
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "docker"})
	dep := createProject(t, s, "py-docker")
	logs := func(rev string) string { return phaseLogs(s, dep, rev) }
	files := pyDeployFiles(t)
	rev1 := deploySource(t, s, dep, files)
	if st := waitPyRevision(t, s, dep, rev1, 15*time.Minute); st != "DEPLOYED" {
		t.Fatalf("revision 1 ended %s:\n%s\n%s", st, logs(rev1), s.Logs())
	}
	l1 := logs(rev1)
	for _, want := range []string{"slipway-python:3.11-", "==> install the dependencies into slipway-deps:", "langgraph-1.2.22"} {
		if !strings.Contains(l1, want) {
			t.Fatalf("build log of revision 1 lacks %q:\n%s", want, l1)
		}
	}
	url, _ := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["url"].(string)
	ok := func() int { return servertest.Do(t, "GET", url+"/ok", nil, "X-Api-Key", s.Key).Status }
	if st := ok(); st != 200 {
		t.Fatalf("GET /ok through the deployment URL: %d", st)
	}
	if got := pySDKGreeting(t, url, s.Key, "Ada"); got != "hello from langgraph.json, Ada" {
		t.Fatalf("the graph through the Python SDK answered %q", got)
	}
	// The revision image runs the project with its dependencies, and
	// tells the agent which interpreter to use.
	inImage := func(rev, code string) string {
		t.Helper()
		out, err := osexec.Command("docker", "run", "--rm", "--network", "none", "--entrypoint", "/bin/sh", "slipway/"+dep+":"+rev,
			"-c", `echo "$SLIPWAY_AGENT_PYTHON $PY_DEPLOY_GREETING"; exec /venv/bin/python -c "$0"`, code).CombinedOutput()
		if err != nil {
			t.Fatalf("run revision %s's image: %v\n%s", rev, err, out)
		}
		return string(out)
	}
	imp := `import langgraph.graph, py_deploy.agent as a; print(a.graph.invoke({"name": "x"})["greeting"])`
	if out := inImage(rev1, imp); !strings.Contains(out, "/venv/bin/python hello from langgraph.json") || !strings.Contains(out, "hello from langgraph.json, x") {
		t.Fatalf("revision 1's image:\n%s", out)
	}

	files["py_deploy/agent.py"] = strings.Replace(files["py_deploy/agent.py"], `f"{prefix}, `, `f"{prefix}! `, 1)
	rev2 := deploySource(t, s, dep, files)
	if st := waitPyRevision(t, s, dep, rev2, 5*time.Minute); st != "DEPLOYED" {
		t.Fatalf("revision 2 ended %s:\n%s", st, logs(rev2))
	}
	if l := logs(rev2); !strings.Contains(l, "(same dependencies)") || strings.Contains(l, "==> install the dependencies") {
		t.Fatalf("a code-only change installed again:\n%s", l)
	}
	if out := inImage(rev2, imp); !strings.Contains(out, "hello from langgraph.json! x") {
		t.Fatalf("revision 2's image:\n%s", out)
	}
	if got := pySDKGreeting(t, url, s.Key, "Ada"); got != "hello from langgraph.json! Ada" {
		t.Fatalf("revision 2 through the Python SDK answered %q", got)
	}

	bad := map[string]string{}
	for k, v := range files {
		bad[k] = v
	}
	bad["pyproject.toml"] = strings.Replace(bad["pyproject.toml"], `"langgraph==1.2.22",`, `"langgraph==1.2.22", "slipway-no-such-package==9.9.9",`, 1)
	rev3 := deploySource(t, s, dep, bad)
	if st := waitPyRevision(t, s, dep, rev3, 5*time.Minute); st != "BUILD_FAILED" {
		t.Fatalf("a missing dependency ended %s:\n%s", st, logs(rev3))
	}
	if l := logs(rev3); !strings.Contains(l, "No matching distribution found for slipway-no-such-package==9.9.9") {
		t.Fatalf("logs lack pip's error:\n%s", l)
	}
	if st := ok(); st != 200 {
		t.Fatalf("the previous revision stopped serving: %d", st)
	}

	// An import error ends DEPLOY_FAILED with the loader's message, and
	// revision 2 serves on.
	bad = map[string]string{}
	for k, v := range files {
		bad[k] = v
	}
	bad["py_deploy/agent.py"] = "import slipway_not_installed_module\n" + bad["py_deploy/agent.py"]
	rev4 := deploySource(t, s, dep, bad)
	if st := waitPyRevision(t, s, dep, rev4, 5*time.Minute); st != "DEPLOY_FAILED" {
		t.Fatalf("an import error ended %s:\n%s", st, logs(rev4))
	}
	if l := logs(rev4); !strings.Contains(l, "No module named 'slipway_not_installed_module'") {
		t.Fatalf("logs lack the import error:\n%s", l)
	}
	if got := pySDKGreeting(t, url, s.Key, "Bo"); got != "hello from langgraph.json! Bo" {
		t.Fatalf("revision 2 after the failed one answered %q", got)
	}
}
