package processtest_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"slipway/server/servertest"
)

// TestSwarmQueueAutoscale: queue_min_scale 2 and queue_max_scale 4 on the
// swarm runtime. 50 runs of 8 s each, more than two workers take at once
// (16 runs each), leave runs pending: the autoscaler sets 4 workers (a
// line in the deployment's log, a metric; in one step or two), the new workers execute some
// of the runs, all end in success; once nothing is pending for 30 s the
// workers go back one at a time to 2.
func TestSwarmQueueAutoscale(t *testing.T) {
	reg := requireSwarm(t)
	env, pg, rd := scaledSwarmEnv(t, reg)
	metricsAddr := servertest.FreeAddr(t)
	env["SLIPWAY_METRICS_ADDR"] = metricsAddr
	s := servertest.Start(t, env)
	d := s.Do("POST", "/v2/deployments", map[string]any{"name": "swarm-autoscale", "source": "internal_source",
		"source_config":          map[string]any{"resource_spec": map[string]any{"min_scale": 1, "queue_min_scale": 2, "queue_max_scale": 4}},
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
	queueSvc := "slipway-" + dep + "-queue"
	replicas := func() int {
		res, err := engine(t).ServiceInspect(context.Background(), queueSvc, client.ServiceInspectOptions{})
		if err != nil {
			t.Fatalf("the queue service: %v", err)
		}
		return int(*res.Service.Spec.Mode.Replicated.Replicas)
	}
	if n := replicas(); n != 2 {
		t.Fatalf("the queue service starts with %d workers, want queue_min_scale 2", n)
	}
	url := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["url"].(string)

	type run struct{ thread, id string }
	var runs []run
	load := time.Now()
	for range 50 {
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
	t.Logf("the workers went 2 -> 4 %s into the load; the 50 runs executed on %v (%s after the load began)", up.Round(time.Millisecond), workers, time.Since(load).Round(time.Millisecond))
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
	// far the 50 creations got), down one at a time.
	for _, want := range []string{"autoscale: queue workers 2 -> ", " -> 4 (", "autoscale: queue workers 4 -> 3", "autoscale: queue workers 3 -> 2"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the deployment's log has no %q", want)
		}
	}
	raw, err := os.ReadFile(filepath.Join(s.DataDir, "metrics-token"))
	if err != nil {
		t.Fatal(err)
	}
	mf := scrape(t, "http://"+metricsAddr+"/metrics", strings.TrimSpace(string(raw)))
	dirs := map[string]float64{}
	if f := mf["slipway_swarm_autoscale_decisions_total"]; f != nil {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if l.GetName() == "direction" {
					dirs[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	if dirs["up"] < 1 || dirs["up"] > 2 || dirs["down"] != 2 {
		t.Errorf("slipway_swarm_autoscale_decisions_total: %v, want 1 or 2 up and 2 down", dirs)
	}
	if f := mf["slipway_swarm_queue_workers"]; f == nil || len(f.Metric) != 1 || f.Metric[0].GetGauge().GetValue() != 2 {
		t.Errorf("slipway_swarm_queue_workers: %v, want 2", f)
	}
	if r := s.Do("DELETE", "/v2/deployments/"+dep, nil); r.Status != 204 {
		t.Fatalf("delete: %d", r.Status)
	}
}
