package processtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"slipway/server/servertest"
)

// TestSwarmAutoscale: min_scale 1, max_scale 2, queue_min_scale 2 and
// queue_max_scale 4 on the swarm runtime, with a target of 10 requests a
// second per API replica.
//
// API replicas: requests from 4 clients without pause scale the API
// service to 2 (a line in the deployment's log, a metric), and the proxy
// spreads requests over both; once the rate stays low (the polling
// below) the service goes back to 1 while those requests keep being
// answered.
//
// Queue workers: 64 runs of 8 s each, more than three workers take at once
// (16 runs each), leave runs pending: the autoscaler sets 4 workers (in
// one step or two), the new workers execute some of the runs, all end in
// success; once nothing is pending for 30 s the workers go back one at a
// time to 2.
func TestSwarmAutoscale(t *testing.T) {
	reg := requireSwarm(t)
	env, pg, rd := scaledSwarmEnv(t, reg)
	metricsAddr := servertest.FreeAddr(t)
	env["SLIPWAY_METRICS_ADDR"] = metricsAddr
	env["SLIPWAY_SWARM_API_REQUESTS_PER_REPLICA"] = "10"
	s := servertest.Start(t, env)
	d := s.Do("POST", "/v2/deployments", map[string]any{"name": "swarm-autoscale", "source": "internal_source",
		"source_config": map[string]any{"resource_spec": map[string]any{"min_scale": 1, "max_scale": 2,
			"queue_min_scale": 2, "queue_max_scale": 4}},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}, "secrets": []any{}})
	if d.Status != 201 {
		t.Fatalf("create: %d %s", d.Status, d.Body)
	}
	dep := d.Map()["id"].(string)
	redisAdmin := servertest.RedisClient(t, rd)
	t.Cleanup(func() { servertest.DropAgentDatabase(t, pg, "slipway_dep_"+strings.ReplaceAll(dep, "-", "")) })
	t.Cleanup(func() { redisAdmin.Do(context.Background(), "acl", "deluser", "slipway-dep-"+dep) })
	rev := deploySource(t, s, dep, swarmApp(t))
	if st := waitStatus(t, s, dep, rev); st != "DEPLOYED" {
		t.Fatalf("revision ended %s:\n%s\n%s", st, revLogs(s, dep, rev), s.Logs())
	}
	apiSvc, queueSvc := "slipway-"+dep, "slipway-"+dep+"-queue"
	replicasOf := func(svc string) int {
		res, err := engine(t).ServiceInspect(context.Background(), svc, client.ServiceInspectOptions{})
		if err != nil {
			t.Fatalf("the service %s: %v", svc, err)
		}
		return int(*res.Service.Spec.Mode.Replicated.Replicas)
	}
	replicas := func() int { return replicasOf(queueSvc) }
	if n := replicas(); n != 2 {
		t.Fatalf("the queue service starts with %d workers, want queue_min_scale 2", n)
	}
	if n := replicasOf(apiSvc); n != 1 {
		t.Fatalf("the API service starts with %d replicas, want min_scale 1", n)
	}
	url := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["url"].(string)

	// search is one request through the deployment URL; not servertest.Do,
	// whose t.Fatal belongs to the test's goroutine.
	search := func() error {
		req, _ := http.NewRequest("POST", url+"/assistants/search", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Api-Key", s.Key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("%d %s", resp.StatusCode, body)
		}
		return nil
	}

	// API replicas: 4 clients without pause until the service has 2.
	hammer := time.Now()
	stop := make(chan struct{})
	failed := make(chan string, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := search(); err != nil {
					failed <- err.Error()
					return
				}
			}
		}()
	}
	for deadline := time.Now().Add(60 * time.Second); replicasOf(apiSvc) != 2; time.Sleep(500 * time.Millisecond) {
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			t.Fatalf("the API service has %d replicas 60 s into the request load, want max_scale 2:\n%s", replicasOf(apiSvc), s.Logs())
		}
	}
	close(stop)
	wg.Wait()
	select {
	case f := <-failed:
		t.Fatalf("a request of the load failed: %s", f)
	default:
	}
	t.Logf("the API replicas went 1 -> 2 %s into the request load", time.Since(hammer).Round(time.Millisecond))
	// The proxy takes the new replica in as soon as it answers GET /ok.
	var by map[string]int
	for deadline := time.Now().Add(60 * time.Second); len(by) < 2; time.Sleep(time.Second) {
		if time.Now().After(deadline) {
			t.Fatalf("requests after the scale-up were served by %v, want both API replicas", by)
		}
		ids := make([]string, 10)
		for i := range ids {
			ids[i] = fmt.Sprintf("autoscale-%d-%d", time.Now().UnixNano(), i)
			if r := servertest.Do(t, "POST", url+"/assistants/search", map[string]any{}, "X-Api-Key", s.Key, "X-Request-Id", ids[i]); r.Status != 200 {
				t.Fatalf("request %d: %d %s", i, r.Status, r.Body)
			}
		}
		time.Sleep(time.Second) // the replicas' logs
		by = servedByTask(t, apiSvc, ids)
	}
	t.Logf("10 requests after the scale-up, per API replica: %v", by)
	// A client at about 3 requests a second (under half the target for
	// the one replica left) from now until after the scale-down: every
	// request is answered, also while a replica goes.
	var slow struct {
		sync.Mutex
		n    int
		errs []string
	}
	stopSlow := make(chan struct{})
	slowDone := make(chan struct{})
	go func() {
		defer close(slowDone)
		for {
			select {
			case <-stopSlow:
				return
			case <-time.After(300 * time.Millisecond):
			}
			err := search()
			slow.Lock()
			slow.n++
			if err != nil {
				slow.errs = append(slow.errs, err.Error())
			}
			slow.Unlock()
		}
	}()

	// Each queue worker runs 16 runs at once (SLIPWAY_AGENT_WORKERS's
	// default). The load is more than three workers take, so runs stay
	// pending until the fourth comes, whichever moment the autoscaler's
	// ticks fall on: with 50 runs, a tick early in the load saw 2 pending
	// and added one worker, and the three then took all but 2, fewer than
	// one per worker, so the fourth never came.
	const slots, nRuns = 16, 4 * 16
	type run struct{ thread, id string }
	var runs []run
	load := time.Now()
	for range nRuns {
		th := servertest.Do(t, "POST", url+"/threads", map[string]any{}, "X-Api-Key", s.Key).Map()["thread_id"].(string)
		r := servertest.Do(t, "POST", url+"/threads/"+th+"/runs", map[string]any{"assistant_id": "agent",
			"input": map[string]any{"messages": []any{map[string]any{"type": "human", "content": "hi"}}, "sleep": 8}}, "X-Api-Key", s.Key)
		if r.Status != 200 {
			t.Fatalf("create run: %d %s", r.Status, r.Body)
		}
		runs = append(runs, run{th, r.Map()["run_id"].(string)})
	}
	for deadline := time.Now().Add(60 * time.Second); replicas() != 4; time.Sleep(500 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the queue service has %d workers 60 s into the load, want queue_max_scale 4:\n%s", replicas(), s.Logs())
		}
	}
	up := time.Since(load)
	workers := map[string]int{}
	for _, r := range runs {
		var got map[string]any
		for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
			got = servertest.Do(t, "GET", url+"/threads/"+r.thread+"/runs/"+r.id, nil, "X-Api-Key", s.Key).Map()
			if st := got["status"]; st != "pending" && st != "running" || time.Now().After(deadline) {
				break
			}
		}
		if got["status"] != "success" {
			t.Fatalf("run %s ended %v", r.id, got["status"])
		}
		md, _ := got["metadata"].(map[string]any)
		w, _ := md["worker"].(string)
		slot, _, _ := strings.Cut(strings.TrimPrefix(w, "queue-"), "-")
		workers["queue-"+slot]++
	}
	t.Logf("the workers went 2 -> 4 %s into the load; the %d runs (%d slots a worker) executed on %v (%s after the load began)", up.Round(time.Millisecond), nRuns, slots, workers, time.Since(load).Round(time.Millisecond))
	if workers["queue-3"]+workers["queue-4"] == 0 {
		t.Errorf("no run executed on the workers the autoscaler added: %v", workers)
	}
	idle := time.Now()
	for deadline := time.Now().Add(2 * time.Minute); replicas() != 2; time.Sleep(time.Second) {
		if time.Now().After(deadline) {
			t.Fatalf("the queue service still has %d workers 2 minutes after the load", replicas())
		}
	}
	t.Logf("back to 2 workers %s after the last run ended", time.Since(idle).Round(time.Millisecond))
	// The slow client and the polling above stayed under half the target
	// for the one API replica left: the second went.
	for deadline := time.Now().Add(time.Minute); replicasOf(apiSvc) != 1; time.Sleep(time.Second) {
		if time.Now().After(deadline) {
			t.Fatalf("the API service still has %d replicas", replicasOf(apiSvc))
		}
	}
	time.Sleep(5 * time.Second) // past the replica's stop
	close(stopSlow)
	<-slowDone
	t.Logf("the slow client's %d requests through the scale-down: %d failed", slow.n, len(slow.errs))
	if len(slow.errs) > 0 || slow.n < 30 {
		t.Fatalf("the slow client: %d requests, failures %v", slow.n, slow.errs)
	}

	var body struct {
		Logs []struct {
			Message string `json:"message"`
		} `json:"logs"`
	}
	if err := json.Unmarshal(s.Do("GET", "/v2/deployments/"+dep+"/logs", nil).Body, &body); err != nil {
		t.Fatal(err)
	}
	var logs string
	for _, l := range body.Logs {
		if strings.Contains(l.Message, "autoscale") {
			logs += l.Message + "\n"
		}
	}
	t.Logf("the deployment's log:\n%s", logs)
	// Up in one step or two (the pending runs a tick sees depend on how
	// far the creations got), down one at a time.
	for _, want := range []string{"autoscale: queue workers 2 -> ", " -> 4 (", "autoscale: queue workers 4 -> 3", "autoscale: queue workers 3 -> 2",
		"autoscale: API replicas 1 -> 2 (", "autoscale: API replicas 2 -> 1 ("} {
		if !strings.Contains(logs, want) {
			t.Errorf("the deployment's log has no %q", want)
		}
	}
	raw, err := os.ReadFile(filepath.Join(s.DataDir, "metrics-token"))
	if err != nil {
		t.Fatal(err)
	}
	mf := scrape(t, "http://"+metricsAddr+"/metrics", strings.TrimSpace(string(raw)))
	dirs := map[string]float64{} // service/direction
	if f := mf["slipway_swarm_autoscale_decisions_total"]; f != nil {
		for _, m := range f.Metric {
			var svc, dir string
			for _, l := range m.Label {
				switch l.GetName() {
				case "service":
					svc = l.GetValue()
				case "direction":
					dir = l.GetValue()
				}
			}
			dirs[svc+"/"+dir] += m.GetCounter().GetValue()
		}
	}
	if dirs["queue/up"] < 1 || dirs["queue/up"] > 2 || dirs["queue/down"] != 2 || dirs["api/up"] != 1 || dirs["api/down"] != 1 {
		t.Errorf("slipway_swarm_autoscale_decisions_total: %v, want 1 or 2 queue/up, 2 queue/down, 1 api/up, 1 api/down", dirs)
	}
	if f := mf["slipway_swarm_queue_workers"]; f == nil || len(f.Metric) != 1 || f.Metric[0].GetGauge().GetValue() != 2 {
		t.Errorf("slipway_swarm_queue_workers: %v, want 2", f)
	}
	if f := mf["slipway_swarm_api_replicas"]; f == nil || len(f.Metric) != 1 || f.Metric[0].GetGauge().GetValue() != 1 {
		t.Errorf("slipway_swarm_api_replicas: %v, want 1", f)
	}
	if r := s.Do("DELETE", "/v2/deployments/"+dep, nil); r.Status != 204 {
		t.Fatalf("delete: %d", r.Status)
	}
}
