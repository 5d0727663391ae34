package agent

import (
	"context"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// TestMetricsPythonHost: with a real LangGraph graph in a Python host
// (testdata/graphs/py-agent/steps.py), every checkpoint the host writes is
// timed once (as many observations as checkpoints in the thread's
// history), and a host that dies and is started again counts one restart.
func TestMetricsPythonHost(t *testing.T) {
	m := NewMetrics()
	e := stepsHostEngine(t, "metricspy", func(e *Engine) { e.Metrics = m })
	th, err := e.CreateThread("", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		r, _, err := e.CreateRun(th.ThreadID, RunCreate{AssistantID: "steps", Input: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Join(context.Background(), th.ThreadID, r.RunID); err != nil {
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
	host := e.Graphs["steps"].(*HostGraph).host.Pick()
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
