package swarm

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"slipway/runtime"
)

// policyStep is one tick of an autoscaling policy: at a time, with a
// current count and a load (pending runs, requests a second), the count
// it must decide.
type policyStep struct {
	at      time.Duration
	current int
	load    float64
	want    int
}

// policyCase is a sequence of ticks of one policy from a fresh state.
type policyCase struct {
	name  string
	steps []policyStep
}

// runPolicy checks each case's steps against a fresh policy's decide: the
// count, and a reason exactly when the count changes.
func runPolicy(t *testing.T, cases []policyCase, fresh func() func(now time.Time, current int, load float64) (int, string)) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			decide := fresh()
			t0 := time.Unix(1e9, 0)
			for i, s := range tc.steps {
				got, why := decide(t0.Add(s.at), s.current, s.load)
				if got != s.want {
					t.Fatalf("step %d (%v, count %d, load %g): %d, want %d", i, s.at, s.current, s.load, got, s.want)
				}
				if (got != s.current) != (why != "") {
					t.Fatalf("step %d: a decision %d -> %d with reason %q", i, s.current, got, why)
				}
			}
		})
	}
}

// TestScalePolicy: the queue workers scale up at once when at least one
// run per worker is pending (in proportion, at most max), and down one at
// a time only after no run has been pending for downAfter (hysteresis),
// never below min. The load is pending runs.
func TestScalePolicy(t *testing.T) {
	runPolicy(t, []policyCase{
		{"burst scales up in proportion, capped", []policyStep{{0, 1, 1, 2}, {5 * time.Second, 2, 10, 4}}},
		{"fewer pending than workers: no change", []policyStep{{0, 3, 2, 3}, {5 * time.Second, 3, 1, 3}}},
		{"at max: no change", []policyStep{{0, 4, 40, 4}}},
		{"idle: down one step per downAfter, not below min", []policyStep{
			{0, 4, 0, 4}, {20 * time.Second, 4, 0, 4}, {30 * time.Second, 4, 0, 3},
			{40 * time.Second, 3, 0, 3}, {60 * time.Second, 3, 0, 2}, {90 * time.Second, 2, 0, 1},
			{200 * time.Second, 1, 0, 1}}},
		{"a pending run restarts the idle clock", []policyStep{
			{0, 3, 0, 3}, {25 * time.Second, 3, 1, 3}, {30 * time.Second, 3, 0, 3}, {55 * time.Second, 3, 0, 3}, {60 * time.Second, 3, 0, 2}}},
	}, func() func(time.Time, int, float64) (int, string) {
		p := &scalePolicy{min: 1, max: 4, downAfter: 30 * time.Second}
		return func(now time.Time, current int, pending float64) (int, string) {
			return p.decide(now, current, int(pending))
		}
	})
}

// TestAPIPolicy: the API replicas scale up at once to what the request
// rate needs at the target (at most max), and down one at a time only
// after one replica fewer would have run under half the target for
// downAfter (hysteresis), never below min. The load is requests a second.
func TestAPIPolicy(t *testing.T) {
	runPolicy(t, []policyCase{
		{"over the target: up to what the rate needs", []policyStep{{0, 1, 25, 3}}},
		{"far over: capped at max", []policyStep{{0, 2, 1000, 4}}},
		{"at the target exactly: no change", []policyStep{{0, 2, 20, 2}}},
		{"between half and the target: no change, ever", []policyStep{{0, 3, 15, 3}, {60 * time.Second, 3, 15, 3}, {120 * time.Second, 3, 15, 3}}},
		{"low: down one step per downAfter, not below min", []policyStep{
			{0, 4, 0, 4}, {20 * time.Second, 4, 0, 4}, {30 * time.Second, 4, 0, 3},
			{45 * time.Second, 3, 0, 3}, {60 * time.Second, 3, 0, 2}, {90 * time.Second, 2, 0, 1},
			{200 * time.Second, 1, 0, 1}}},
		{"load back: the low clock restarts", []policyStep{
			{0, 3, 2, 3}, {25 * time.Second, 3, 12, 3}, {30 * time.Second, 3, 2, 3}, {55 * time.Second, 3, 2, 3}, {60 * time.Second, 3, 2, 2}}},
	}, func() func(time.Time, int, float64) (int, string) {
		return (&apiPolicy{min: 1, max: 4, target: 10, downAfter: 30 * time.Second}).decide
	})
}

// TestAPIPolicyObserve: the rate is the increase of the tasks read twice
// over the time between; a new task adds nothing until its second read, a
// task gone is left out, and a count that went down (a task restarted at
// the same address) adds nothing.
func TestAPIPolicyObserve(t *testing.T) {
	p := &apiPolicy{}
	t0 := time.Unix(1e9, 0)
	if _, ok := p.observe(t0, map[string]float64{"a": 100}); ok {
		t.Fatal("the first read gave a rate")
	}
	for i, s := range []struct {
		after  time.Duration
		counts map[string]float64
		want   float64
	}{
		{5 * time.Second, map[string]float64{"a": 150}, 10},
		{10 * time.Second, map[string]float64{"a": 200, "b": 40}, 10},
		{15 * time.Second, map[string]float64{"a": 225, "b": 65}, 10},
		{20 * time.Second, map[string]float64{"b": 90}, 5},
		{25 * time.Second, map[string]float64{"b": 3}, 0},
	} {
		got, ok := p.observe(t0.Add(s.after), s.counts)
		if !ok || got != s.want {
			t.Fatalf("read %d: %g (ok %v), want %g", i, got, ok, s.want)
		}
	}
}

// TestScrapeSum: the samples of one family, over its label sets, from an
// agent's text exposition, with the agent's token from the URL as its
// header; a family without samples is 0.
func TestScrapeSum(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" || r.Header.Get(runtime.AgentTokenHeader) != "tok" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, `# HELP lg_api_http_requests_total Total.
# TYPE lg_api_http_requests_total counter
lg_api_http_requests_total{method="GET",path="/threads/:thread_id",status="2xx"} 40
lg_api_http_requests_total{method="POST",path="/threads",status="2xx"} 2
lg_api_http_requests_total{method="POST",path="/threads",status="4xx"} 0.5
# HELP lg_api_num_pending_runs Pending.
# TYPE lg_api_num_pending_runs gauge
lg_api_num_pending_runs 7
`)
	}))
	defer srv.Close()
	base := strings.Replace(srv.URL, "http://", "http://agent:tok@", 1)
	for _, tc := range []struct {
		name string
		want float64
	}{{"lg_api_http_requests_total", 42.5}, {"lg_api_num_pending_runs", 7}, {"slipway_agent_sse_streams_open", 0}} {
		got, err := scrapeSum(context.Background(), base, tc.name)
		if err != nil || got != tc.want {
			t.Errorf("%s: %g, %v; want %g", tc.name, got, err, tc.want)
		}
	}
	if _, err := scrapeSum(context.Background(), srv.URL, "lg_api_num_pending_runs"); err == nil {
		t.Error("a scrape without the token succeeded")
	}
}
