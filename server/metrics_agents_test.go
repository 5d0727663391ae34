package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"slipway/runtime"
)

// usageDriver is a runtime's endpoints and usage, for the relay.
type usageDriver struct {
	endpoints map[string]string
	usage     map[string]runtime.Usage
}

func (d usageDriver) Endpoint(dep string) (string, bool) {
	e, ok := d.endpoints[dep]
	return e, ok
}

func (d usageDriver) Usage(_ context.Context, dep string) (runtime.Usage, bool) {
	u, ok := d.usage[dep]
	return u, ok
}

// TestAgentRelay: the relay reads each agent's /metrics with its token,
// labels every series with the deployment's id (dropping one the agent
// set itself), merges the families of several agents, reports each
// agent's scrape as up or down, and adds the runtime's CPU and memory.
func TestAgentRelay(t *testing.T) {
	agentSrv := func(body string) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/metrics" || r.Header.Get(runtime.AgentTokenHeader) != "tok" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			_, _ = w.Write([]byte(body))
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	a := agentSrv("# TYPE runs_total counter\nruns_total{outcome=\"success\",deployment_id=\"forged\"} 3\n")
	b := agentSrv("# TYPE runs_total counter\nruns_total{outcome=\"success\"} 5\n")
	withToken := func(u string) string { return "http://x:tok@" + u[len("http://"):] }
	g := &agentGatherer{
		deployments: func() []string { return []string{"dep-a", "dep-b", "dep-gone", "dep-badtoken"} },
		driver: usageDriver{
			endpoints: map[string]string{"dep-a": withToken(a.URL), "dep-b": withToken(b.URL), "dep-badtoken": b.URL},
			usage:     map[string]runtime.Usage{"dep-a": {CPUSeconds: 1.5, MemoryBytes: 2048}, "dep-b": {CPUSeconds: -1, MemoryBytes: 4096}},
		},
		client: http.DefaultClient, timeout: 5e9,
	}
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]float64{} // family → deployment → value
	for _, f := range fams {
		got[f.GetName()] = map[string]float64{}
		for _, m := range f.Metric {
			deps := 0
			dep := ""
			for _, l := range m.Label {
				if l.GetName() == labelDeployment {
					deps++
					dep = l.GetValue()
				}
			}
			if deps != 1 {
				t.Errorf("%s: a series with %d deployment_id labels", f.GetName(), deps)
			}
			got[f.GetName()][dep] = value(m)
		}
	}
	want := map[string]map[string]float64{
		"runs_total":   {"dep-a": 3, "dep-b": 5},
		metricScrapeUp: {"dep-a": 1, "dep-b": 1, "dep-gone": 0, "dep-badtoken": 0},
		metricCPU:      {"dep-a": 1.5},
		metricMemory:   {"dep-a": 2048, "dep-b": 4096},
	}
	for name, byDep := range want {
		if len(got[name]) != len(byDep) {
			t.Errorf("%s: %v, want %v", name, got[name], byDep)
			continue
		}
		for dep, v := range byDep {
			if got[name][dep] != v {
				t.Errorf("%s{deployment_id=%q} = %v, want %v", name, dep, got[name][dep], v)
			}
		}
	}
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return -1
}
