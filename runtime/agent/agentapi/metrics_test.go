package agentapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/rs/zerolog"

	"slipway/runtime/agent"
	"slipway/runtime/agent/agentapi"
	"slipway/storage"
)

// TestMetricsInProcess: the API served in the test process (so -race
// watches the counting on the run path) with metrics: concurrent runs on
// their own threads and one cancelled while pending are counted exactly at
// GET /metrics, which no custom route or disabled group can hide, and
// requests count under their route pattern.
func TestMetricsInProcess(t *testing.T) {
	db, err := storage.Open(filepath.Join(t.TempDir(), "agent.db"), time.Second, agent.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	eng := &agent.Engine{DB: db, Graphs: map[string]agent.Graph{"echo": agent.Echo{}}, Workers: 4, Timeout: time.Minute,
		Log: zerolog.Nop(), Metrics: agent.NewMetrics()}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&agentapi.API{Engine: eng, MaxBody: 1 << 20, Disabled: []string{"meta"}}).Handler())
	t.Cleanup(func() {
		srv.Close()
		stop()
		eng.Wait()
		db.Close()
	})
	post := func(path string, body any) map[string]any {
		t.Helper()
		raw, _ := json.Marshal(body)
		resp, err := http.Post(srv.URL+path, "application/json", bytes.NewReader(raw))
		if err != nil {
			t.Error(err)
			return nil
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode/100 != 2 {
			t.Errorf("POST %s: %d %v", path, resp.StatusCode, out)
		}
		return out
	}
	const runs = 12
	var wg sync.WaitGroup
	for range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			th := post("/threads", map[string]any{})["thread_id"].(string)
			post("/threads/"+th+"/runs/wait", map[string]any{"assistant_id": "echo", "input": map[string]any{"messages": []any{}}})
		}()
	}
	wg.Wait()
	// A run delayed by after_seconds stays pending until it is cancelled.
	th := post("/threads", map[string]any{})["thread_id"].(string)
	late := post("/threads/"+th+"/runs", map[string]any{"assistant_id": "echo", "after_seconds": 3600})["run_id"].(string)
	mid := scrapeAgent(t, srv.URL)
	if got := gaugeValue(mid, "lg_api_num_pending_runs"); got != 1 {
		t.Errorf("pending runs with one delayed: %v", got)
	}
	post("/threads/"+th+"/runs/"+late+"/cancel", nil)

	fams := scrapeAgent(t, srv.URL)
	for _, c := range []struct {
		name  string
		label string
		want  float64
	}{
		{"slipway_agent_runs_created_total", "", runs + 1},
		{"slipway_agent_runs_total", "success", runs},
		{"slipway_agent_runs_total", "cancelled", 1},
		{"slipway_agent_runs_total", "error", 0},
		{"slipway_agent_run_duration_seconds", "success", runs},
		{"slipway_agent_run_duration_seconds", "cancelled", 0},
		{"slipway_agent_run_queue_wait_seconds", "", runs},
		{"lg_api_num_pending_runs", "", 0},
		{"lg_api_num_running_runs", "", 0},
		{"lg_api_workers_max", "", 4},
	} {
		if got := valueWith(fams, c.name, "outcome", c.label); got != c.want {
			t.Errorf("%s{outcome=%q} = %v, want %v", c.name, c.label, got, c.want)
		}
	}
	if got := valueWith(fams, "lg_api_http_requests_total", "path", "/threads/:thread_id/runs/:run_id"); got != runs {
		t.Errorf("requests to /threads/:thread_id/runs/:run_id: %v, want %v", got, runs)
	}
	if got := valueWith(fams, "lg_api_http_requests_total", "path", "/threads"); got != runs+1 {
		t.Errorf("requests to /threads: %v, want %v", got, runs+1)
	}
}

func scrapeAgent(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

func gaugeValue(fams map[string]*dto.MetricFamily, name string) float64 {
	return valueWith(fams, name, "", "")
}

// valueWith sums family name's series whose label key is value (all when
// value is ""): values, or histogram counts.
func valueWith(fams map[string]*dto.MetricFamily, name, key, value string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	sum := 0.0
	for _, m := range f.Metric {
		if value != "" {
			match := false
			for _, l := range m.Label {
				match = match || (l.GetName() == key && l.GetValue() == value)
			}
			if !match {
				continue
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}
