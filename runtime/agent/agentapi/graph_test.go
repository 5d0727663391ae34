package agentapi_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"slipway/server/servertest"
)

// counterApp builds testdata/graphs/counter into a fresh app directory
// whose langgraph.json serves it as the command graph "counter" and the
// built-in "echo", plus the extra graphs given (id → spec JSON); it
// returns the configuration's path.
func counterApp(t *testing.T, extra map[string]string) string {
	t.Helper()
	app := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(app, "counter"), "./testdata/graphs/counter")
	build.Dir = servertest.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build counter graph: %v\n%s", err, out)
	}
	graphs := `"counter": {"command": ["./counter"]}, "echo": {"builtin": "echo"}`
	for id, spec := range extra {
		graphs += fmt.Sprintf(", %q: %s", id, spec)
	}
	cfg := `{"graphs": {` + graphs + `}, "dependencies": ["."]}`
	path := filepath.Join(app, "langgraph.json")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// startWithCounter serves the counter graph next to a "path:attr" graph
// that needs a language host, with a short per-run timeout.
func startWithCounter(t *testing.T) *servertest.Agent {
	t.Helper()
	return servertest.StartAgent(t, map[string]string{
		"SLIPWAY_GRAPH_CONFIG":              counterApp(t, map[string]string{"pyagent": `"./agent.rb:graph"`}),
		"SLIPWAY_AGENT_RUN_TIMEOUT_SECONDS": "1",
	})
}

// counterRun starts a run of the counter graph on a new thread and waits
// for it to end, returning the thread and the run as the API reports it.
func counterRun(t *testing.T, a *servertest.Agent, input map[string]any) (string, map[string]any) {
	t.Helper()
	th := newThread(t, a)
	r := a.Do("POST", "/threads/"+th+"/runs", map[string]any{"assistant_id": "counter", "input": input})
	if r.Status != 200 {
		t.Fatalf("create run: %d %s", r.Status, r.Body)
	}
	id := r.Map()["run_id"].(string)
	if j := a.Do("GET", "/threads/"+th+"/runs/"+id+"/join", nil); j.Status != 200 {
		t.Fatalf("join: %d %s", j.Status, j.Body)
	}
	return th, a.Do("GET", "/threads/"+th+"/runs/"+id, nil).Map()
}

// TestCommandGraphs drives the command-graph protocol through a real agent:
// state updates, a failing program, garbage on stdout, the per-run
// timeout, cancellation, and the start-up report of path:attr graphs.
func TestCommandGraphs(t *testing.T) {
	a := startWithCounter(t)
	if !strings.Contains(a.Logs(), "needs a language host") || !strings.Contains(a.Logs(), "pyagent") {
		t.Fatalf("path:attr graph not reported at start-up:\n%s", a.Logs())
	}
	if r := a.Do("POST", "/threads/"+newThread(t, a)+"/runs", map[string]any{"assistant_id": "pyagent"}); r.Status != 404 {
		t.Fatalf("run on an unserved graph: %d %s", r.Status, r.Body)
	}
	if r := a.Do("GET", "/assistants/"+assistantOf(t, a, "echo"), nil); r.Status != 200 {
		t.Fatalf("echo is always offered: %d %s", r.Status, r.Body)
	}

	t.Run("updates", func(t *testing.T) {
		th := newThread(t, a)
		for i := 1; i <= 2; i++ {
			r := a.Do("POST", "/threads/"+th+"/runs/wait", map[string]any{"assistant_id": "counter",
				"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hello"}}}})
			if r.Status != 200 || r.Map()["count"] != float64(i) {
				t.Fatalf("run %d: %d %s", i, r.Status, r.Body)
			}
		}
		ms := messages(t, a, th)
		if len(ms) != 4 || ms[1]["type"] != "ai" || ms[1]["content"] != "5 characters" || ms[1]["id"] == "" {
			t.Fatalf("messages: %v", ms)
		}
	})
	t.Run("interrupt", func(t *testing.T) {
		th, run := counterRun(t, a, map[string]any{"interrupt": "approve the refund?"})
		if run["status"] != "success" {
			t.Fatalf("interrupting run: %v", run)
		}
		thread := a.Do("GET", "/threads/"+th, nil).Map()
		if thread["status"] != "interrupted" || !strings.Contains(fmt.Sprint(thread["interrupts"]), "approve the refund?") {
			t.Fatalf("thread after interrupt: %v", thread)
		}
		st := a.Do("GET", "/threads/"+th+"/state", nil).Map()
		intr, _ := st["interrupts"].([]any)
		if len(intr) != 1 || intr[0].(map[string]any)["value"] != "approve the refund?" {
			t.Fatalf("state interrupts: %v", st["interrupts"])
		}
		w := a.Do("POST", "/threads/"+th+"/runs/wait", map[string]any{"assistant_id": "counter", "command": map[string]any{"resume": "yes"}})
		if w.Status != 200 || !strings.Contains(string(w.Body), "resumed with yes") {
			t.Fatalf("resume: %d %s", w.Status, w.Body)
		}
		thread = a.Do("GET", "/threads/"+th, nil).Map()
		if thread["status"] != "idle" || fmt.Sprint(thread["interrupts"]) != "map[]" {
			t.Fatalf("thread after resume: %v", thread)
		}
	})
	t.Run("exit_status", func(t *testing.T) {
		_, run := counterRun(t, a, map[string]any{"fail": "the model is down"})
		if run["status"] != "error" || !strings.Contains(fmt.Sprint(run["error"]), "the model is down") {
			t.Fatalf("failing program: %v", run)
		}
	})
	t.Run("garbage", func(t *testing.T) {
		// A well-behaved run on another thread at the same time is unharmed.
		good := newThread(t, a)
		gr := a.Do("POST", "/threads/"+good+"/runs", map[string]any{"assistant_id": "counter", "input": map[string]any{"sleep": 0.2}})
		_, run := counterRun(t, a, map[string]any{"garbage": true})
		if run["status"] != "error" || !strings.Contains(fmt.Sprint(run["error"]), "graph protocol error") {
			t.Fatalf("garbage: %v", run)
		}
		gid := gr.Map()["run_id"].(string)
		a.Do("GET", "/threads/"+good+"/runs/"+gid+"/join", nil)
		if st := a.Do("GET", "/threads/"+good+"/runs/"+gid, nil).Map()["status"]; st != "success" {
			t.Fatalf("neighbour run: %v", st)
		}
		w := a.Do("POST", "/runs/wait", map[string]any{"assistant_id": "counter", "input": map[string]any{"garbage": true}})
		if e, ok := w.Map()["__error__"].(map[string]any); w.Status != 200 || !ok || e["error"] != "GraphProtocolError" {
			t.Fatalf("stateless wait on garbage: %d %s", w.Status, w.Body)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		start := time.Now()
		th, run := counterRun(t, a, map[string]any{"sleep": 30})
		if run["status"] != "timeout" || time.Since(start) > 10*time.Second {
			t.Fatalf("timeout: %v after %v", run, time.Since(start))
		}
		if st := a.Do("GET", "/threads/"+th, nil).Map()["status"]; st != "error" {
			t.Fatalf("thread after timeout: %v", st)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		th := newThread(t, a)
		id := a.Do("POST", "/threads/"+th+"/runs", map[string]any{"assistant_id": "counter", "input": map[string]any{"sleep": 30}}).Map()["run_id"].(string)
		time.Sleep(200 * time.Millisecond)
		start := time.Now()
		if r := a.Do("POST", "/threads/"+th+"/runs/"+id+"/cancel?wait=1", nil); r.Status >= 300 {
			t.Fatalf("cancel: %d %s", r.Status, r.Body)
		}
		if st := a.Do("GET", "/threads/"+th+"/runs/"+id, nil).Map()["status"]; st != "interrupted" || time.Since(start) > 3*time.Second {
			t.Fatalf("cancelled run: %v after %v", st, time.Since(start))
		}
	})
}

func assistantOf(t *testing.T, a *servertest.Agent, graph string) string {
	t.Helper()
	r := a.Do("POST", "/assistants/search", map[string]any{"graph_id": graph})
	list, _ := r.JSON().([]any)
	if r.Status != 200 || len(list) == 0 {
		t.Fatalf("assistants of %s: %d %s", graph, r.Status, r.Body)
	}
	return list[0].(map[string]any)["assistant_id"].(string)
}
