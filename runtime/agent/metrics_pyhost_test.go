package agent

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"

	"slipway/storage"
)

// TestMetricsPythonHost: with a real LangGraph graph in a Python host
// (testdata/graphs/py-agent/steps.py), every checkpoint the host writes is
// timed once (as many observations as checkpoints in the thread's
// history), and a host that dies and is started again counts one restart.
func TestMetricsPythonHost(t *testing.T) {
	python := pyHostPython(t)
	_, file, _, _ := runtime.Caller(0)
	src, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "testdata", "graphs", "py-agent", "steps.py"))
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "metricspy")
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
	m := NewMetrics()
	e := &Engine{DB: db, Graphs: graphs, Workers: 2, Timeout: time.Minute, Log: zerolog.Nop(), Python: python,
		CronTick: time.Hour, TTLTick: time.Hour, Metrics: m}
	t.Cleanup(func() { cancel(); e.Wait(); db.Close(); os.RemoveAll(dir) })
	if err := e.StartHosts(ctx, dir, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	th, err := e.CreateThread("", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		r, _, err := e.CreateRun(th.ThreadID, RunCreate{AssistantID: "steps", Input: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Join(ctx, th.ThreadID, r.RunID); err != nil {
			t.Fatal(err)
		}
	}
	hist, err := e.History(th.ThreadID, 1000, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := gathered(t, m, "slipway_agent_checkpoint_write_duration_seconds"); got != float64(len(hist)) || got == 0 {
		t.Errorf("checkpoint writes timed: %v, want one per checkpoint (%d)", got, len(hist))
	}
	if got := gathered(t, m, "slipway_agent_host_restarts_total"); got != 0 {
		t.Fatalf("host restarts before any: %v", got)
	}
	host := graphs["steps"].(*HostGraph).host
	host.Restart("the metrics test")
	deadline := time.Now().Add(30 * time.Second)
	for gathered(t, m, "slipway_agent_host_restarts_total") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the restart was never counted")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// gathered is family name's value (a histogram's count) in m's registry.
func gathered(t *testing.T, m *Metrics, name string) float64 {
	t.Helper()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		sum := 0.0
		for _, x := range f.Metric {
			sum += metricValue(x)
		}
		return sum
	}
	return 0
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}
