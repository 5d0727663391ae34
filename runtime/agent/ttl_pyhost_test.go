package agent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"slipway/storage"
)

// pyHostPython is the test virtualenv's interpreter (SLIPWAY_TEST_PYTHON,
// else /opt/slipway-ci/venv/bin/python, as the Python host's e2e tests
// use); the test skips without it, and fails under CI=true.
func pyHostPython(t *testing.T) string {
	t.Helper()
	python := os.Getenv("SLIPWAY_TEST_PYTHON")
	if python == "" {
		python = "/opt/slipway-ci/venv/bin/python"
	}
	if out, err := exec.Command(python, "-c", "import langgraph, langchain_core").CombinedOutput(); err != nil {
		msg := "a Python host test needs a virtualenv with langgraph (.ci/run makes /opt/slipway-ci/venv; or set SLIPWAY_TEST_PYTHON): " +
			python + ": " + string(out) + err.Error()
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return python
}

// TestTTLKeepLatestPythonHost sweeps a thread of a real LangGraph graph
// (testdata/graphs/py-agent/steps.py in a Python host) with keep_latest:
// its state is unchanged, its history is its latest checkpoint only, and a
// new run continues from it.
func TestTTLKeepLatestPythonHost(t *testing.T) {
	clk := &fakeClock{}
	clk.Set("2026-03-01T10:00:00Z")
	e := stepsHostEngine(t, "ttlpy", func(e *Engine) { e.Clock = clk.Now })
	th, err := e.CreateThread("", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	id := th.ThreadID
	run := func() {
		t.Helper()
		r, _, err := e.CreateRun(id, RunCreate{AssistantID: "steps", Input: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Join(context.Background(), id, r.RunID); err != nil {
			t.Fatal(err)
		}
		if got, _ := e.GetRun(id, r.RunID); got.Status != RunSuccess {
			t.Fatalf("run %s: %s %s", r.RunID, got.Status, got.Error)
		}
	}
	for range 3 {
		run()
	}
	before, err := e.GetState(id, "")
	if err != nil {
		t.Fatal(err)
	}
	if steps, _ := before.Values["steps"].([]any); len(steps) != 9 {
		t.Fatalf("state before: %v", before.Values)
	}
	hist, err := e.History(id, 0, "")
	if err != nil || len(hist) < 4 {
		t.Fatalf("history before: %d checkpoints %v", len(hist), err)
	}
	rowsBefore := len(lgKeys(t, e, id))
	if err := e.SetThreadTTL(id, &ThreadTTL{Strategy: TTLKeepLatest, Minutes: 10}); err != nil {
		t.Fatal(err)
	}
	clk.Set("2026-03-01T10:10:00Z")
	if n, err := e.SweepTTL(); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v, want 1", n, err)
	}
	after, err := e.GetState(id, "")
	if err != nil || !reflect.DeepEqual(after.Values, before.Values) || after.Checkpoint != before.Checkpoint ||
		!reflect.DeepEqual(after.Next, before.Next) {
		t.Fatalf("state changed by keep_latest:\n%+v\nwant\n%+v (%v)", after, before, err)
	}
	hist, err = e.History(id, 0, "")
	if err != nil || len(hist) != 1 || hist[0].Checkpoint != before.Checkpoint {
		t.Fatalf("history after keep_latest: %d checkpoints %v", len(hist), err)
	}
	t.Logf("keep_latest: %d rows in the lg bucket before, %d after", rowsBefore, len(lgKeys(t, e, id)))
	run()
	again, err := e.GetState(id, "")
	if steps, _ := again.Values["steps"].([]any); err != nil || len(steps) != 12 {
		t.Fatalf("a run after keep_latest: %v %v", again.Values, err)
	}
}

// stepsHostEngine starts an engine (bbolt) serving
// testdata/graphs/py-agent/steps.py in a Python host, configured further by
// configure before it starts. The host and its data outlive the test's
// last line by a moment: a directory of their own (prefix), removed
// best-effort.
func stepsHostEngine(t *testing.T, prefix string, configure func(*Engine)) *Engine {
	t.Helper()
	python := pyHostPython(t)
	_, file, _, _ := runtime.Caller(0)
	src, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "testdata", "graphs", "py-agent", "steps.py"))
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	project := filepath.Join(dir, "project")
	if err := os.MkdirAll(project, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(project, "langgraph.json")
	for name, body := range map[string][]byte{"steps.py": src, "langgraph.json": []byte(`{"graphs": {"steps": "./steps.py:graph"}}`)} {
		if err := os.WriteFile(filepath.Join(project, name), body, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	graphs, _, err := LoadGraphs(cfg, os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	db, err := storage.Open(filepath.Join(dir, "agent.db"), time.Second, Migrations)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Engine{DB: db, Graphs: graphs, Workers: 2, Timeout: time.Minute, Log: zerolog.Nop(), Python: python,
		CronTick: time.Hour, TTLTick: time.Hour}
	configure(e)
	t.Cleanup(func() { cancel(); e.Wait(); db.Close(); os.RemoveAll(dir) })
	if err := e.StartHosts(ctx, dir, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return e
}
