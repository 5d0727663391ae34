package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"slipway/config"
	"slipway/server/admin"
	"slipway/server/servertest"
)

// TestChartAPI: GET /v2/deployments/{id}/metrics serves what the charts
// sampled from a deployment's agent (a stand-in serving /metrics), over
// both windows, works with SLIPWAY_METRICS_ADDR unset, and answers 422
// for a bad window and 404 for an unknown or deleted deployment, or
// another organization's.
func TestChartAPI(t *testing.T) {
	var (
		mu                     sync.Mutex
		success, errs, pending int
	)
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		// Successes took 0.2 s, errors 3 s.
		fmt.Fprintf(w, "# TYPE slipway_agent_runs_total counter\n"+
			"slipway_agent_runs_total{outcome=\"success\"} %d\nslipway_agent_runs_total{outcome=\"error\"} %d\n"+
			"# TYPE slipway_agent_run_duration_seconds histogram\n", success, errs)
		for _, o := range []struct {
			name string
			n    int
			in1  bool
		}{{"success", success, true}, {"error", errs, false}} {
			in1 := 0
			if o.in1 {
				in1 = o.n
			}
			fmt.Fprintf(w, "slipway_agent_run_duration_seconds_bucket{outcome=%q,le=\"1\"} %d\n"+
				"slipway_agent_run_duration_seconds_bucket{outcome=%q,le=\"5\"} %d\n"+
				"slipway_agent_run_duration_seconds_bucket{outcome=%q,le=\"+Inf\"} %d\n"+
				"slipway_agent_run_duration_seconds_sum{outcome=%q} 0\nslipway_agent_run_duration_seconds_count{outcome=%q} %d\n",
				o.name, in1, o.name, o.n, o.name, o.n, o.name, o.name, o.n)
		}
		fmt.Fprintf(w, "# TYPE lg_api_num_pending_runs gauge\nlg_api_num_pending_runs %d\n", pending)
	}))
	defer agent.Close()
	set := func(s, e, p int) {
		mu.Lock()
		success, errs, pending = s, e, p
		mu.Unlock()
	}

	var app *App
	// A long interval: the test samples itself, the ticker does not.
	s := servertest.StartWith(t, map[string]string{"SLIPWAY_RUNTIME": "fake", "SLIPWAY_CHART_INTERVAL": "1m"},
		servertest.ServeFactory(func(cfg config.Serve, log zerolog.Logger) (servertest.App, error) {
			a, err := New(context.Background(), cfg, log, "dev")
			app = a
			return a, err
		}))
	dep := servertest.EchoDeployment(t, s, "charted", agent.URL, nil)
	charts := app.a.charts

	get := func(query string) map[string]any {
		t.Helper()
		r := s.Do("GET", "/v2/deployments/"+dep+"/metrics"+query, nil)
		if r.Status != 200 {
			t.Fatalf("GET metrics%s: %d %s", query, r.Status, r.Body)
		}
		return r.Map()
	}
	if got := get(""); got["window"] != "1h" || len(got["points"].([]any)) != 0 || got["step_seconds"] != 60.0 {
		t.Fatalf("before any sample: %v", got)
	}
	t0 := time.Now()
	set(2, 0, 0)
	charts.sample(t0)
	set(5, 2, 4) // 3 successes and 2 errors since
	charts.sample(t0.Add(time.Minute))

	hour := get("?window=1h")
	points := hour["points"].([]any)
	if len(points) != 2 {
		t.Fatalf("1h: %d points, want 2: %v", len(points), hour)
	}
	totals := hour["run_totals"].(map[string]any)
	if totals["success"] != 3.0 || totals["error"] != 2.0 || totals["cancelled"] != 0.0 {
		t.Errorf("1h totals %v, want 3 successes and 2 errors (the runs before the first sample are the baseline)", totals)
	}
	last := points[1].(map[string]any)
	// 5 runs: 3 in (0, 1], 2 in (1, 5]. p50: rank 2.5 of 3 in the first.
	if last["pending_runs"] != 4.0 || last["seconds"] != 60.0 || last["p50_seconds"] != 2.5/3 || last["p95_seconds"] == nil {
		t.Errorf("the last point: %v", last)
	}
	if first := points[0].(map[string]any); first["runs"] != nil {
		t.Errorf("the first point (the baseline) has runs: %v", first)
	}
	day := get("?window=24h")
	if day["step_seconds"] != 300.0 || day["run_totals"].(map[string]any)["success"] != 3.0 || len(day["points"].([]any)) < 1 {
		t.Errorf("24h: %v", day)
	}

	for _, c := range []struct {
		path   string
		status int
		loc    string
	}{
		{"/v2/deployments/" + dep + "/metrics?window=7d", 422, "window"},
		{"/v2/deployments/" + dep + "/metrics?window=", 422, "window"},
		{"/v2/deployments/not-a-uuid/metrics", 422, "deployment_id"},
		{"/v2/deployments/00000000-0000-4000-8000-000000000000/metrics", 404, ""},
		{"/api-host/v2/deployments/" + dep + "/metrics?window=24h", 200, ""},
	} {
		r := s.Do("GET", c.path, nil)
		if r.Status != c.status {
			t.Errorf("GET %s: %d %s, want %d", c.path, r.Status, r.Body, c.status)
			continue
		}
		body := r.Map()
		switch c.status {
		case 422:
			e := body["detail"].([]any)[0].(map[string]any)
			loc := e["loc"].([]any)
			if loc[len(loc)-1] != c.loc || e["msg"] == "" || e["type"] == "" {
				t.Errorf("GET %s: %v, want loc/msg/type naming %s", c.path, body, c.loc)
			}
		case 404:
			if body["detail"] == nil {
				t.Errorf("GET %s: %v, want a detail", c.path, body)
			}
		}
	}

	// Another organization's credential, naming its own workspace, is
	// told the deployment does not exist.
	adm := func(args ...string) string {
		var out, errb bytes.Buffer
		if code := admin.Main(args, s.DataDir, &out, &errb); code != 0 {
			t.Fatalf("slipway admin %v: exit %d\n%s", args, code, errb.String())
		}
		return strings.TrimSpace(out.String())
	}
	keyB := adm("org", "create-admin-key", adm("org", "create", "--name", "Other"))
	wss, _ := s.Do("GET", "/api/v1/workspaces", nil, "X-Api-Key", keyB).JSON().([]any)
	if len(wss) == 0 {
		t.Fatal("the other organization has no workspace")
	}
	wsB := wss[0].(map[string]any)["id"].(string)
	if r := s.Do("GET", "/v2/deployments/"+dep+"/metrics", nil, "X-Api-Key", keyB, "X-Tenant-Id", wsB); r.Status != 404 {
		t.Errorf("another organization reads the charts: %d %s", r.Status, r.Body)
	}

	// Deleted: its ring goes at the next sample, and the API says 404.
	if r := s.Do("DELETE", "/v2/deployments/"+dep, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		charts.sample(time.Now())
		charts.mu.Lock()
		_, kept := charts.deps[dep]
		charts.mu.Unlock()
		if !kept {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a deleted deployment's chart ring is kept")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := s.Do("GET", "/v2/deployments/"+dep+"/metrics", nil); r.Status != 404 {
		t.Errorf("a deleted deployment's metrics: %d %s", r.Status, r.Body)
	}
}
