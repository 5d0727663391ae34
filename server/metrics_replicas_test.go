package server

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"slipway/runtime"
)

// replicaDriver is a runtime running scaled deployments, for the relay.
type replicaDriver struct {
	usageDriver
	replicas map[string][]runtime.ReplicaEndpoint
}

func (d replicaDriver) ReplicaEndpoints(dep string) []runtime.ReplicaEndpoint { return d.replicas[dep] }

// TestAgentRelayReplicas: a scaled deployment's agents (API replicas and
// queue workers) are each read, their series labelled with the replica
// (replacing one an agent set itself) and the deployment; one replica
// that cannot be read fails the deployment's scrape; an unscaled
// deployment beside them is read as before, without a replica label.
func TestAgentRelayReplicas(t *testing.T) {
	agentSrv := func(body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/metrics" || r.Header.Get(runtime.AgentTokenHeader) != "tok" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			_, _ = w.Write([]byte(body))
		}))
		t.Cleanup(srv.Close)
		return "http://x:tok@" + srv.URL[len("http://"):]
	}
	api0 := agentSrv("# TYPE runs_total counter\nruns_total{outcome=\"success\"} 0\n")
	queue0 := agentSrv("# TYPE runs_total counter\nruns_total{outcome=\"success\",replica=\"forged\"} 7\n")
	single := agentSrv("# TYPE runs_total counter\nruns_total{outcome=\"success\"} 2\n")
	g := &agentGatherer{
		deployments: func() []string { return []string{"scaled", "broken", "single"} },
		driver: replicaDriver{
			usageDriver: usageDriver{endpoints: map[string]string{"scaled": api0, "broken": api0, "single": single}},
			replicas: map[string][]runtime.ReplicaEndpoint{
				"scaled": {{Name: "api-0", URL: api0}, {Name: "queue-0", URL: queue0}},
				"broken": {{Name: "api-0", URL: api0}, {Name: "queue-0", URL: "http://x:tok@127.0.0.1:1"}},
			},
		},
		client: http.DefaultClient, timeout: 5e9,
	}
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	type key struct{ name, dep, replica string }
	got := map[key]float64{}
	for _, f := range fams {
		for _, m := range f.Metric {
			k := key{name: f.GetName()}
			for _, l := range m.Label {
				switch l.GetName() {
				case labelDeployment:
					k.dep = l.GetValue()
				case labelReplica:
					if k.replica != "" {
						t.Errorf("%s: two replica labels", f.GetName())
					}
					k.replica = l.GetValue()
				}
			}
			got[k] = value(m)
		}
	}
	want := map[key]float64{
		{"runs_total", "scaled", "api-0"}:   0,
		{"runs_total", "scaled", "queue-0"}: 7,
		{"runs_total", "single", ""}:        2,
		{metricScrapeUp, "scaled", ""}:      1,
		{metricScrapeUp, "broken", ""}:      0,
		{metricScrapeUp, "single", ""}:      1,
	}
	if len(got) != len(want) {
		t.Errorf("series %v, want %v", got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%+v = %v (present %t), want %v", k, g, ok, v)
		}
	}
}
