package processtest_test

import (
	"encoding/json"
	"fmt"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"slipway/server/servertest"
)

// deploymentClient sends requests to a deployment through the proxy, with
// the control plane's key.
type deploymentClient struct {
	t    *testing.T
	base string
	key  string
}

func (c *deploymentClient) Do(method, path string, body any, headers ...string) *servertest.Response {
	c.t.Helper()
	return servertest.Do(c.t, method, c.base+path, body, append([]string{"X-Api-Key", c.key}, headers...)...)
}

// TestScaledDeploymentServesRuns is the acceptance of a scaled
// deployment, end to end: `slipway serve` on the process runtime with
// PostgreSQL and Redis configured deploys a graph with min_scale 2 and
// queue_min_scale 2 (two API replicas and two queue workers on the
// database, Redis user and prefix the control plane provisions), and
// everything goes through the deployment's URL, the proxy spreading the
// requests over the API replicas:
//   - runs created through the proxy execute on the queue workers;
//   - a stream read with the official Python SDK gets every event, the
//     same as from one agent process;
//   - kill -9 of the worker running a run: the run is taken over once its
//     lease (30 s, the default) has run out, as attempt 2, and finishes
//     once, leaving the checkpoints of one run;
//   - kill -9 of the API replica holding a stream: the client reconnects
//     through the proxy with Last-Event-ID and the joined stream is the
//     whole stream;
//   - 50 racing creations with multitask_strategy reject: one 200 and 49
//     409s.
func TestScaledDeploymentServesRuns(t *testing.T) {
	waitParallel(t)
	requireRuntime(t, "process")
	python := soakPython(t)
	pg := servertest.PostgresAdminURL(t)
	rd := servertest.RedisAdminURL(t)
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "process", "SLIPWAY_POSTGRES_URL": pg, "SLIPWAY_REDIS_URL": rd})
	sd := createScaled(t, s, pg, rd, "scaled-runs", map[string]any{"min_scale": 2, "queue_min_scale": 2})
	dep := sd.id
	rev := deploySource(t, s, dep, map[string]string{
		"langgraph.json": `{"graphs": {"ticks": {"command": ["./bin/ticks"]}, "slow": {"command": ["sh", "-c", "TICKS=40 exec ./bin/ticks"]}, "agent": {"builtin": "echo"}}}`,
		"bin/ticks":      ticksScript,
	})
	if st := waitStatus(t, s, dep, rev); st != "DEPLOYED" {
		t.Fatalf("revision ended %s:\n%s\n%s", st, phaseLogs(s, dep, rev), s.Logs())
	}
	if _, pids := replicaProcesses(t, sd.depDir); len(pids) != 4 {
		t.Fatalf("agents of the deployment: %v, want api-0, api-1, queue-0, queue-1", pids)
	}
	base := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["url"].(string)
	c := &deploymentClient{t: t, base: base, key: s.Key}
	agentLogs := func() string { return string(s.Do("GET", "/v2/deployments/"+dep+"/logs", nil).Body) }

	t.Run("runs created through the proxy execute on the queue workers", func(t *testing.T) {
		for i := range 6 {
			th := newThread(t, c)
			msg := fmt.Sprintf("hello %d", i)
			r := c.Do("POST", "/threads/"+th+"/runs/wait", map[string]any{"assistant_id": "agent",
				"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": msg}}}})
			if r.Status != 200 || !strings.Contains(string(r.Body), msg) {
				t.Fatalf("run %d: %d %s\n%s", i, r.Status, r.Body, agentLogs())
			}
			runs := c.Do("GET", "/threads/"+th+"/runs", nil).JSON().([]any)
			md := runs[0].(map[string]any)["metadata"].(map[string]any)
			if w := md["worker"]; (w != "queue-0" && w != "queue-1") || md["attempt"] != float64(1) {
				t.Fatalf("run %d ran on %v (attempt %v), not on a queue worker", i, w, md["attempt"])
			}
		}
	})

	t.Run("a stream through the proxy read with the Python SDK gets every event", func(t *testing.T) {
		single := servertest.StartAgent(t, map[string]string{"SLIPWAY_GRAPH_CONFIG": filepath.Join(replicaApp(t), "langgraph.json")})
		body := map[string]any{"assistant_id": "ticks", "input": map[string]any{}, "stream_mode": []string{"values", "updates", "custom"}}
		var want [][2]any
		for _, ev := range streamAll(t, "POST", single.URL+"/threads/"+newThread(t, single)+"/runs/stream", body) {
			var data any
			if err := json.Unmarshal([]byte(ev.Data), &data); err != nil {
				t.Fatalf("event %v: %v", ev, err)
			}
			want = append(want, [2]any{ev.Event, data})
		}
		script := `
import asyncio, json, sys
from langgraph_sdk import get_client

async def main(url, key):
    client = get_client(url=url, api_key=key)
    thread = await client.threads.create()
    parts = [[p.event, p.data] async for p in client.runs.stream(thread["thread_id"], "ticks", input={},
                                                                 stream_mode=["values", "updates", "custom"])]
    print(json.dumps(parts))

asyncio.run(main(*sys.argv[1:]))
`
		out, err := osexec.Command(python, "-c", script, base, s.Key).Output()
		if err != nil {
			t.Fatalf("the Python SDK through %s: %v\n%s", base, err, out)
		}
		var got [][2]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("the SDK's events: %v\n%s", err, out)
		}
		norm := func(evs [][2]any) string {
			for _, ev := range evs {
				if m, ok := ev[1].(map[string]any); ok && ev[0] == "metadata" {
					delete(m, "run_id")
				}
			}
			raw, _ := json.Marshal(evs)
			return string(raw)
		}
		if len(want) < 12 || norm(got) != norm(want) {
			t.Fatalf("through the proxy with the SDK:\n%s\nfrom one agent:\n%s", norm(got), norm(want))
		}
	})

	t.Run("reject answers 409 to all but one of 50 racing creations through the proxy", func(t *testing.T) {
		rejectRace(t, c, c, []string{base}, "X-Api-Key", s.Key)
	})

	t.Run("kill -9 of the API replica holding a stream: the client resumes through the proxy with Last-Event-ID", func(t *testing.T) {
		// The proxy takes the API replicas in turn (and this test is the
		// deployment's only client): the replica that served a probe gets
		// the request after next, the stream.
		probe := fmt.Sprintf("probe-%d", time.Now().UnixNano())
		if r := c.Do("POST", "/assistants/search", map[string]any{}, "X-Request-Id", probe); r.Status != 200 {
			t.Fatalf("probe: %d %s", r.Status, r.Body)
		}
		holder := ""
		for id, n := range servedBy(t, s, dep, []string{probe}) {
			if n == 1 && (id == "api-0" || id == "api-1") {
				holder = id
			}
		}
		if holder == "" {
			t.Fatal("no API replica served the probe")
		}
		th := newThread(t, c)
		modes := []string{"values", "updates", "custom"}
		resp := openRunSSE(t, "POST", base+"/threads/"+th+"/runs/stream", map[string]any{"assistant_id": "slow", "input": map[string]any{},
			"stream_mode": modes, "stream_resumable": true}, "X-Api-Key", s.Key)
		var first []runEvent
		readRunSSE(resp.Body, func(ev runEvent) bool {
			first = append(first, ev)
			if len(first) == 8 {
				killReplica(t, sd.depDir, holder)
			}
			return true
		})
		resp.Body.Close()
		if len(first) < 8 || len(first) > 20 {
			t.Fatalf("read %d events before %s died (it did not hold the stream?)", len(first), holder)
		}
		var md map[string]any
		_ = json.Unmarshal([]byte(first[0].Data), &md)
		run, _ := md["run_id"].(string)
		q := "?stream_mode=values&stream_mode=updates&stream_mode=custom"
		rest := streamAll(t, "GET", base+"/threads/"+th+"/runs/"+run+"/stream"+q, nil,
			"X-Api-Key", s.Key, "Last-Event-ID", strconv.Itoa(first[len(first)-1].ID))
		whole := streamAll(t, "GET", base+"/threads/"+th+"/runs/"+run+"/stream"+q, nil, "X-Api-Key", s.Key)
		if got := append(first, rest...); fmt.Sprint(got) != fmt.Sprint(whole) || len(whole) < 42 {
			t.Fatalf("resumed:\n%v\nthe whole stream:\n%v", got, whole)
		}
	})

	t.Run("kill -9 of the worker running a run: taken over as attempt 2 and finished once", func(t *testing.T) {
		th := newThread(t, c)
		run := c.Do("POST", "/threads/"+th+"/runs", map[string]any{"assistant_id": "slow", "input": map[string]any{}}).Map()["run_id"].(string)
		victim := waitRunning(t, c, th, run)
		time.Sleep(time.Second)
		killReplica(t, sd.depDir, victim)
		killed := time.Now()
		// The lease is 30 s; the run itself 8 s.
		deadline := time.Now().Add(90 * time.Second)
		var got map[string]any
		for {
			got = runOf(t, c, th, run)
			if st := got["status"]; st != "pending" && st != "running" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the run did not finish within 90 s of the kill: %v\n%s", got, agentLogs())
			}
			time.Sleep(250 * time.Millisecond)
		}
		t.Logf("taken over and finished %v after the kill of %s", time.Since(killed).Round(100*time.Millisecond), victim)
		md := got["metadata"].(map[string]any)
		if w := md["worker"]; got["status"] != "success" || md["attempt"] != float64(2) || (w != "queue-0" && w != "queue-1") {
			t.Fatalf("after the takeover: status %v, attempt %v, worker %v (killed %s)", got["status"], md["attempt"], w, victim)
		}
		if r := c.Do("GET", "/threads/"+th+"/runs/"+run+"/join", nil); r.Status != 200 || !strings.Contains(string(r.Body), `"done":true`) {
			t.Fatalf("join: %d %s", r.Status, r.Body)
		}
		evs := streamAll(t, "GET", base+"/threads/"+th+"/runs/"+run+"/stream?stream_mode=updates&stream_mode=custom", nil, "X-Api-Key", s.Key)
		checkRetriedOnce(t, c, th, evs)
		// The takeover is in the agent log, from a queue worker.
		if logs := agentLogs(); !strings.Contains(logs, "run taken over") || !strings.Contains(logs, "[queue-") {
			t.Fatalf("the agent log does not show the takeover by a worker:\n%s", logs)
		}
	})
}
