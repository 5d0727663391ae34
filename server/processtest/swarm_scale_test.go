package processtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	neturl "net/url"
	osexec "os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"slipway/runtime/agent"
	"slipway/server/servertest"
)

// sdkStreamScript streams one run of the echo graph through a deployment
// URL with the official Python SDK and prints what it saw as JSON: the
// run id, the number of values events and the last message's content.
const sdkStreamScript = `
import asyncio, json, sys
from langgraph_sdk import get_client

async def main(url, key, word):
    client = get_client(url=url, api_key=key)
    thread = await client.threads.create()
    run_id, values, last = None, 0, None
    async for part in client.runs.stream(thread["thread_id"], "agent",
            input={"messages": [{"type": "human", "content": word}]}, stream_mode="values"):
        if part.event == "metadata":
            run_id = part.data.get("run_id")
        elif part.event == "values":
            values += 1
            last = part.data
        elif part.event == "error":
            print(json.dumps({"error": part.data}))
            return
    msgs = (last or {}).get("messages") or []
    print(json.dumps({"thread_id": thread["thread_id"], "run_id": run_id, "values": values,
                      "content": msgs[-1].get("content") if msgs else None}))

asyncio.run(main(*sys.argv[1:]))
`

// sdkStream runs sdkStreamScript and returns what it printed.
func sdkStream(t *testing.T, python, url, key, word string) map[string]any {
	t.Helper()
	out, err := osexec.Command(python, "-c", sdkStreamScript, url, key, word).CombinedOutput()
	if err != nil {
		t.Fatalf("the SDK stream: %v\n%s", err, out)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the SDK stream printed %s", out)
	}
	return got
}

// scaledSwarmEnv is the control plane's environment for scaled
// deployments on the one-node swarm: PostgreSQL and Redis listen on
// loopback, so the tasks reach them through forwarders on the swarm's
// gateway, which Slipway then names in the agents' URLs.
func scaledSwarmEnv(t *testing.T, reg string) (env map[string]string, pgAdmin, redisAdmin string) {
	t.Helper()
	pgAdmin, redisAdmin = servertest.PostgresAdminURL(t), servertest.RedisAdminURL(t)
	pu, err := neturl.Parse(pgAdmin)
	if err != nil {
		t.Fatal(err)
	}
	pu.Host = gatewayForward(t, pu.Host)
	ru, err := neturl.Parse(redisAdmin)
	if err != nil {
		t.Fatal(err)
	}
	ru.Host = gatewayForward(t, ru.Host)
	return map[string]string{"SLIPWAY_RUNTIME": "swarm", "SLIPWAY_REGISTRY": reg,
		"SLIPWAY_POSTGRES_URL": pu.String(), "SLIPWAY_REDIS_URL": ru.String()}, pgAdmin, redisAdmin
}

// servedByTask counts, per container of the service, the request ids its
// agent logged.
func servedByTask(t *testing.T, service string, ids []string) map[string]int {
	t.Helper()
	ctx := context.Background()
	cs, err := engine(t).ContainerList(ctx, client.ContainerListOptions{Filters: client.Filters{}.Add("label", "com.docker.swarm.service.name="+service)})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, c := range cs.Items {
		rc, err := engine(t).ContainerLogs(ctx, c.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		_, _ = stdcopy.StdCopy(&out, &out, rc)
		rc.Close()
		for _, id := range ids {
			if strings.Contains(out.String(), `"request_id":"`+id+`"`) {
				count[c.ID[:12]]++
			}
		}
	}
	return count
}

// TestSwarmScaledDeployment: min_scale 2 and queue_min_scale 2 on the
// swarm runtime are two services, two API tasks (role api) and two queue
// workers (role queue), each with a worker id of its own, all on the
// deployment's PostgreSQL database and Redis user; requests through the
// deployment URL are spread over both API tasks, runs execute on the
// queue workers, the official SDK streams a run through the URL, the
// official JS and Python SDK suites pass through it, and delete leaves
// nothing.
func TestSwarmScaledDeployment(t *testing.T) {
	reg := requireSwarm(t)
	python := soakPython(t)
	env, pg, rd := scaledSwarmEnv(t, reg)
	s := servertest.Start(t, env)
	d := s.Do("POST", "/v2/deployments", map[string]any{"name": "swarm-scaled", "source": "internal_source",
		"source_config":          map[string]any{"resource_spec": map[string]any{"min_scale": 2, "queue_min_scale": 2, "db_max_connections": 8}},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}, "secrets": []any{}})
	if d.Status != 201 {
		t.Fatalf("create: %d %s", d.Status, d.Body)
	}
	dep := d.Map()["id"].(string)
	user := "slipway-dep-" + dep
	redisAdmin := servertest.RedisClient(t, rd)
	t.Cleanup(func() { servertest.DropAgentDatabase(t, pg, "slipway_dep_"+strings.ReplaceAll(dep, "-", "")) })
	t.Cleanup(func() { redisAdmin.Do(context.Background(), "acl", "deluser", user) })
	start := time.Now()
	rev := deploySource(t, s, dep, swarmApp(t))
	if st := waitStatus(t, s, dep, rev); st != "DEPLOYED" {
		t.Fatalf("revision ended %s:\n%s\n%s", st, revLogs(s, dep, rev), s.Logs())
	}
	t.Logf("deployed 2 API tasks and 2 queue workers in %v", time.Since(start).Round(time.Millisecond))
	for svc, want := range map[string]uint64{"slipway-" + dep: 2, "slipway-" + dep + "-queue": 2} {
		res, err := engine(t).ServiceInspect(context.Background(), svc, client.ServiceInspectOptions{})
		if err != nil {
			t.Fatalf("service %s: %v", svc, err)
		}
		if got := *res.Service.Spec.Mode.Replicated.Replicas; got != want {
			t.Errorf("service %s runs %d replicas, want %d", svc, got, want)
		}
	}
	url := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["url"].(string)

	// Requests spread over both API tasks.
	ids := make([]string, 20)
	for i := range ids {
		ids[i] = fmt.Sprintf("swarm-scale-%d-%d", time.Now().UnixNano(), i)
		if r := servertest.Do(t, "POST", url+"/assistants/search", map[string]any{}, "X-Api-Key", s.Key, "X-Request-Id", ids[i]); r.Status != 200 {
			t.Fatalf("request %d: %d %s", i, r.Status, r.Body)
		}
	}
	var by map[string]int
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		by = servedByTask(t, "slipway-"+dep, ids)
		total := 0
		for _, n := range by {
			total += n
		}
		if total == len(ids) || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("20 requests served per API task: %v", by)
	if len(by) != 2 {
		t.Fatalf("20 requests were served by %d API tasks (%v), want both", len(by), by)
	}
	for c, n := range by {
		if n < 5 {
			t.Fatalf("API task %s served %d of 20 requests (%v): not spread", c, n, by)
		}
	}

	// Runs execute on the queue workers, which see the deployment's
	// Redis user and their role.
	workers := map[string]bool{}
	for range 4 {
		e := swarmEnvOf(t, s, url, "SLIPWAY_AGENT_ROLE", "SLIPWAY_AGENT_WORKER_ID", "SLIPWAY_AGENT_DB_MAX_CONNECTIONS")
		w := fmt.Sprint(e["SLIPWAY_AGENT_WORKER_ID"])
		if e["SLIPWAY_AGENT_ROLE"] != "queue" || !strings.HasPrefix(w, "queue-") || e["SLIPWAY_AGENT_DB_MAX_CONNECTIONS"] != "2" {
			t.Fatalf("a run executed with %v, want a queue worker with 2 connections", e)
		}
		workers[w] = true
	}
	t.Logf("4 runs executed on queue workers %v", workers)

	// The official SDK streams a run through the deployment URL; its
	// metadata names the queue worker that executed it.
	word := fmt.Sprintf("swarm-%d", time.Now().UnixNano())
	got := sdkStream(t, python, url, s.Key, word)
	if got["content"] != word || got["values"].(float64) < 1 {
		t.Fatalf("the SDK stream: %v", got)
	}
	run := servertest.Do(t, "GET", fmt.Sprintf("%s/threads/%s/runs/%s", url, got["thread_id"], got["run_id"]), nil, "X-Api-Key", s.Key).Map()
	md, _ := run["metadata"].(map[string]any)
	if w := fmt.Sprint(md["worker"]); run["status"] != "success" || !strings.HasPrefix(w, "queue-") {
		t.Fatalf("the streamed run: status %v on worker %v", run["status"], md["worker"])
	}

	// The official SDK suites, JS and Python (threads, runs with every
	// multitask strategy, streams, assistants, store, crons), through the
	// deployment URL, their runs on the queue workers.
	runSDKSuite(t, url, s.Key)

	// A replica lost with its node leaves its database connections open
	// at the server: Slipway ends those of workers that are gone and
	// spares those of workers that exist.
	checkLostReplicaConnections(t, s, dep, pg, fmt.Sprint(md["worker"]))

	// Delete: both services, the database, the Redis user and its keys go.
	if r := s.Do("DELETE", "/v2/deployments/"+dep, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	var left []string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		if left = swarmLeftovers(t, s, dep); len(left) == 0 {
			break
		}
	}
	if len(left) > 0 {
		t.Fatalf("left after delete: %v", left)
	}
	if users, keys := servertest.RedisLeft(t, redisAdmin, user, "slipway:"+dep+":"); users != 0 || keys != 0 {
		t.Fatalf("left on Redis: %d users, %d keys", users, keys)
	}
}

// checkLostReplicaConnections opens two connections to dep's agent
// database as the admin role, one named (application_name) as a worker
// that does not exist, one as liveWorker: within the sweeps of 10 s the
// first is ended, and the deployment's log says so; the second stays.
func checkLostReplicaConnections(t *testing.T, s *servertest.Server, dep, admin, liveWorker string) {
	t.Helper()
	ctx := context.Background()
	u, err := neturl.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/slipway_dep_" + strings.ReplaceAll(dep, "-", "")
	connect := func(worker string) *pgx.Conn {
		q := u.Query()
		q.Set("application_name", agent.AppNamePrefix+worker)
		u.RawQuery = q.Encode()
		c, err := pgx.Connect(ctx, u.String())
		if err != nil {
			t.Fatalf("connect to the agent database as %s: %v", worker, err)
		}
		t.Cleanup(func() { _ = c.Close(ctx) })
		return c
	}
	const lostWorker = "queue-9-lostnodetask"
	lost, live := connect(lostWorker), connect(liveWorker)
	opened := time.Now()
	for deadline := opened.Add(45 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		if _, err := lost.Exec(ctx, "select 1"); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the connection of worker %s, which does not exist, is still open after 45 s", lostWorker)
		}
	}
	if _, err := live.Exec(ctx, "select 1"); err != nil {
		t.Fatalf("the connection named as the live worker %s was ended too: %v", liveWorker, err)
	}
	t.Logf("the lost worker's connection was ended %v after it opened; the live worker's stayed", time.Since(opened).Round(100*time.Millisecond))
	want := "ended 1 database connection(s) of replica(s) that are gone: " + lostWorker
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(string(s.Do("GET", "/v2/deployments/"+dep+"/logs", nil).Body), want); time.Sleep(300 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the deployment's log does not say %q", want)
		}
	}
}
