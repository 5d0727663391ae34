package processtest_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"slipway/server/servertest"
)

// scrape reads the control plane's /metrics with its bearer token.
func scrape(t *testing.T, url, token string) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("scrape: %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse the exposition: %v", err)
	}
	return fams
}

// sample sums the series of family name whose labels include want: a
// counter's or gauge's value, a histogram's observation count.
func sample(fams map[string]*dto.MetricFamily, name string, want ...string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	sum := 0.0
outer:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(want); i += 2 {
			if have[want[i]] != want[i+1] {
				continue outer
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		}
	}
	return sum
}

// TestMetricsAfterWorkload: a `slipway serve` with SLIPWAY_METRICS_ADDR
// and a real `slipway agent` behind a deployment. A scripted workload over
// HTTP (a deploy; runs that succeed, fail, stop at an interrupt, and get
// cancelled running and pending; one streamed) moves the counters and
// histograms of /metrics by exactly what was done, the agent's relayed with
// the deployment's id; the gauges show the pending and running runs and
// the open stream while they are; a scrape without the token is refused.
func TestMetricsAfterWorkload(t *testing.T) {
	dir := t.TempDir()
	graphs := `{"graphs": {
		"ok": {"builtin": "echo"},
		"fail": {"command": ["sh", "-c", "cat >/dev/null; echo boom >&2; exit 3"]},
		"ask": {"command": ["sh", "-c", "cat >/dev/null; echo '{\"event\": \"interrupt\", \"data\": \"which?\"}'"]},
		"slow": {"command": ["sh", "-c", "cat >/dev/null; exec sleep 60"]}
	}}`
	if err := os.WriteFile(filepath.Join(dir, "langgraph.json"), []byte(graphs), 0o644); err != nil {
		t.Fatal(err)
	}
	agent := servertest.StartAgent(t, map[string]string{"SLIPWAY_GRAPH_CONFIG": filepath.Join(dir, "langgraph.json")})
	metricsAddr := servertest.FreeAddr(t)
	s := servertest.Start(t, map[string]string{"SLIPWAY_METRICS_ADDR": metricsAddr})
	raw, err := os.ReadFile(filepath.Join(s.DataDir, "metrics-token"))
	if err != nil {
		t.Fatalf("the metrics token: %v", err)
	}
	token := strings.TrimSpace(string(raw))
	url := "http://" + metricsAddr + "/metrics"

	for _, auth := range []string{"", "Bearer wrong-token-0123456789", s.Key} {
		r := servertest.Do(t, "GET", url, nil, "Authorization", auth)
		if r.Status != http.StatusUnauthorized {
			t.Fatalf("scrape with Authorization %q: %d, want 401", auth, r.Status)
		}
	}
	// Every request to the API's own routes counts under its pattern, the
	// ones no route matches under one label.
	before := scrape(t, url, token)
	dep := servertest.EchoDeployment(t, s, "metered", agent.URL, nil)
	unmatched := s.Do("GET", "/no/such/route/"+dep, nil)
	if unmatched.Status != 404 {
		t.Fatalf("unmatched route: %d", unmatched.Status)
	}

	// The workload, through the proxy; statuses are tallied by class.
	proxied := map[string]int{}
	do := func(method, path string, body any) map[string]any {
		t.Helper()
		r := s.Do(method, "/agents/metered"+path, body)
		proxied[fmt.Sprintf("%dxx", r.Status/100)]++
		if r.Status >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Body)
		}
		return r.Map()
	}
	thread := func() string { return do("POST", "/threads", map[string]any{})["thread_id"].(string) }
	wait := func(tid, graph string) map[string]any {
		return do("POST", "/threads/"+tid+"/runs/wait", map[string]any{"assistant_id": graph, "input": map[string]any{"messages": []any{}}})
	}
	t1 := thread()
	wait(t1, "ok")
	wait(t1, "ok")
	t2 := thread()
	wait(t2, "fail")
	t3 := thread()
	wait(t3, "ask")

	// A streamed slow run, a run queued behind it; the gauges see them.
	t4 := thread()
	req, err := http.NewRequest("POST", s.URL+"/agents/metered/threads/"+t4+"/runs/stream",
		strings.NewReader(`{"assistant_id": "slow", "stream_mode": ["values"]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", s.Key)
	req.Header.Set("Content-Type", "application/json")
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	proxied[fmt.Sprintf("%dxx", stream.StatusCode/100)]++
	events := bufio.NewReader(stream.Body)
	slowID := ""
	for slowID == "" {
		line, err := events.ReadString('\n')
		if err != nil {
			t.Fatalf("read the stream: %v", err)
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var meta struct {
				RunID string `json:"run_id"`
			}
			if json.Unmarshal([]byte(data), &meta) == nil {
				slowID = meta.RunID
			}
		}
	}
	queued := do("POST", "/threads/"+t4+"/runs", map[string]any{"assistant_id": "ok", "multitask_strategy": "enqueue"})["run_id"].(string)
	mid := scrape(t, url, token)
	for _, g := range []struct {
		name string
		want float64
	}{{"lg_api_num_running_runs", 1}, {"lg_api_num_pending_runs", 1}, {"slipway_agent_sse_streams_open", 1}} {
		if got := sample(mid, g.name, "deployment_id", dep); got != g.want {
			t.Errorf("while one run runs and one waits: %s = %v, want %v", g.name, got, g.want)
		}
	}
	do("POST", "/threads/"+t4+"/runs/"+queued+"/cancel", nil)
	do("POST", "/threads/"+t4+"/runs/"+slowID+"/cancel?wait=1", nil)
	// The stream ends with its run; read it out so that the proxy has
	// relayed all of it (and counted it) before the last scrape.
	if _, err := io.Copy(io.Discard, events); err != nil {
		t.Fatalf("read the rest of the stream: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for sample(scrape(t, url, token), "slipway_agent_sse_streams_open", "deployment_id", dep) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the stream of the cancelled run stayed open")
		}
		time.Sleep(50 * time.Millisecond)
	}

	after := scrape(t, url, token)
	delta := func(name string, labels ...string) float64 {
		return sample(after, name, labels...) - sample(before, name, labels...)
	}
	check := func(what string, got, want float64) {
		t.Helper()
		if got != want {
			t.Errorf("%s moved by %v, want %v", what, got, want)
		}
	}
	// The control plane's own.
	check("rollout jobs", delta("slipway_reconcile_jobs_total", "kind", "rollout"), 1)
	for _, phase := range []string{"build", "deploy"} {
		check(phase+" successes", delta("slipway_rollout_phases_total", "phase", phase, "outcome", "success"), 1)
		check(phase+" failures", delta("slipway_rollout_phases_total", "phase", phase, "outcome", "failure"), 0)
		check(phase+" durations", delta("slipway_rollout_phase_duration_seconds", "phase", phase), 1)
	}
	check("POST /v2/deployments", delta("slipway_http_requests_total", "route", "/v2/deployments", "method", "POST", "status", "2xx"), 1)
	check("unmatched requests", delta("slipway_http_requests_total", "route", "unmatched", "status", "4xx"), 1)
	total := 0
	for class, n := range proxied {
		total += n
		check("proxied "+class, delta("slipway_proxy_requests_total", "deployment_id", dep, "status", class), float64(n))
	}
	check("proxy latencies", delta("slipway_proxy_request_duration_seconds", "deployment_id", dep), float64(total))
	check("requests on the proxy route", delta("slipway_http_requests_total", "route", "/agents/:name/*path"), float64(total))
	if got := delta("slipway_audit_events_appended_total"); got < 1 {
		t.Errorf("audit appends moved by %v, want at least the deployment's creation", got)
	}
	// The agent's, relayed with the deployment's id.
	check("agent scrape up", sample(after, "slipway_agent_scrape_up", "deployment_id", dep), 1)
	check("runs created", sample(after, "slipway_agent_runs_created_total", "deployment_id", dep), 6)
	for _, o := range []struct {
		outcome    string
		ended, ran float64
	}{{"success", 2, 2}, {"error", 1, 1}, {"interrupted", 1, 1}, {"cancelled", 2, 1}, {"timeout", 0, 0}} {
		check(o.outcome+" runs", sample(after, "slipway_agent_runs_total", "deployment_id", dep, "outcome", o.outcome), o.ended)
		check(o.outcome+" run durations", sample(after, "slipway_agent_run_duration_seconds", "deployment_id", dep, "outcome", o.outcome), o.ran)
	}
	check("queue waits (runs started)", sample(after, "slipway_agent_run_queue_wait_seconds", "deployment_id", dep), 5)
	check("pending runs after", sample(after, "lg_api_num_pending_runs", "deployment_id", dep), 0)
	check("running runs after", sample(after, "lg_api_num_running_runs", "deployment_id", dep), 0)
	// Four waits and the stream share the pattern.
	check("agent wait and stream requests", sample(after, "lg_api_http_requests_total", "deployment_id", dep,
		"path", "/threads/:thread_id/runs/:run_id", "method", "POST", "status", "2xx"), 5)
}

// TestMetricsDeploymentUsage: on each real runtime, a deployed project's
// agent metrics reach /metrics through the runtime's endpoint and the
// agent's token, and its CPU time and memory come from its cgroup
// (process runtime; only when the host gives Slipway cgroups, which /info
// then reports as resource limits) or its container's stats (docker); the
// health checks of the serving agent are counted.
func TestMetricsDeploymentUsage(t *testing.T) {
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			requireRuntime(t, driver)
			metricsAddr := servertest.FreeAddr(t)
			s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": driver, "SLIPWAY_METRICS_ADDR": metricsAddr,
				"SLIPWAY_HEALTH_INTERVAL": "1s"})
			raw, err := os.ReadFile(filepath.Join(s.DataDir, "metrics-token"))
			if err != nil {
				t.Fatal(err)
			}
			url, token := "http://"+metricsAddr+"/metrics", strings.TrimSpace(string(raw))
			d := s.Do("POST", "/v2/deployments", map[string]any{"name": "usage", "source": "internal_source", "source_config": map[string]any{},
				"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}, "secrets": []any{}})
			if d.Status != 201 {
				t.Fatalf("create: %d %s", d.Status, d.Body)
			}
			dep := d.Map()["id"].(string)
			rev := deploySource(t, s, dep, appFiles(t, ""))
			if st := waitStatus(t, s, dep, rev); st != "DEPLOYED" {
				t.Fatalf("revision ended %s:\n%s", st, s.Logs())
			}
			th := s.Do("POST", "/agents/usage/threads", map[string]any{}).Map()["thread_id"].(string)
			if r := s.Do("POST", "/agents/usage/threads/"+th+"/runs/wait", map[string]any{"assistant_id": "agent",
				"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}}); r.Status != 200 {
				t.Fatalf("run: %d %s", r.Status, r.Body)
			}
			// The health watcher checks the serving agent every second.
			deadline := time.Now().Add(20 * time.Second)
			for sample(scrape(t, url, token), "slipway_health_checks_total", "outcome", "healthy") < 1 {
				if time.Now().After(deadline) {
					t.Fatal("no healthy check counted")
				}
				time.Sleep(100 * time.Millisecond)
			}
			fams := scrape(t, url, token)
			if up := sample(fams, "slipway_agent_scrape_up", "deployment_id", dep); up != 1 {
				t.Fatalf("agent scrape up = %v", up)
			}
			if n := sample(fams, "slipway_agent_runs_total", "deployment_id", dep, "outcome", "success"); n != 1 {
				t.Errorf("successful runs relayed: %v, want 1", n)
			}
			limited := strings.Contains(string(s.Do("GET", "/info", nil).Body), "resource limits per deployment")
			if driver == "process" && !limited {
				if fams["slipway_deployment_memory_bytes"] != nil {
					t.Error("memory reported without cgroups")
				}
				t.Log("no cgroups for the process runtime on this host: CPU and memory are not reported, as documented")
				return
			}
			if mem := sample(fams, "slipway_deployment_memory_bytes", "deployment_id", dep); mem < 1<<20 {
				t.Errorf("memory = %v bytes, want at least the agent's MiB", mem)
			}
			if cpu := sample(fams, "slipway_deployment_cpu_seconds_total", "deployment_id", dep); cpu <= 0 && driver == "docker" {
				t.Errorf("cpu = %v s", cpu)
			}
		})
	}
}
