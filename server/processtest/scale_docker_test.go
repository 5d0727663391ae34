package processtest_test

import (
	"context"
	"fmt"
	neturl "net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"slipway/runtime/docker"
	"slipway/server/servertest"
)

// TestDockerScaledDeployment: a deployment with min_scale 2 and
// queue_min_scale 2 on the docker runtime, with PostgreSQL and Redis
// configured, runs four agent containers: api-0 and api-1 (role api),
// queue-0 and queue-1 (role queue), each named and labelled as its
// replica, with its worker id, its share of the database connections, the
// deployment's database and Redis user, the same hardening, and the
// spec's cpu (API) or queue_cpu (workers). Requests through the proxy are
// spread over the two API containers (counted by request id in the agent
// log, whose lines name the replica), runs execute on the workers
// (metadata.worker) and the official JS and Python SDK suites pass
// through the deployment URL; with one API container's process killed, requests
// keep succeeding while its restart policy brings it back, after which it
// gets requests again. A redeploy replaces all four containers, a failed
// one brings the previous four back, a restart of Slipway adopts them;
// deleting
// the deployment leaves no container, volume or network of it, no
// database or role, no Redis user and no key under its prefix.
func TestDockerScaledDeployment(t *testing.T) {
	waitParallel(t)
	requireRuntime(t, "docker")
	pgAdmin := servertest.PostgresAdminURL(t)
	rdAdmin := servertest.RedisAdminURL(t)
	// The test servers listen on loopback, which a container does not
	// reach: Slipway and its containers both use a forwarder on the
	// docker bridge's gateway (an address of the host every container
	// reaches).
	pg, rd := bridgeURL(t, pgAdmin), bridgeURL(t, rdAdmin)
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "docker", "SLIPWAY_POSTGRES_URL": pg, "SLIPWAY_REDIS_URL": rd,
		"SLIPWAY_HEALTH_INTERVAL": "1s"})
	// db_max_connections leaves headroom: the connections of an agent
	// killed below can outlive it on the server (its container's network
	// namespace goes with it, and with it, at times, the FIN) until TCP
	// keepalive notices, and they count against the role's limit.
	d := s.Do("POST", "/v2/deployments", map[string]any{"name": "scaled-docker", "source": "internal_source",
		"source_config": map[string]any{"resource_spec": map[string]any{"min_scale": 2, "queue_min_scale": 2, "db_max_connections": 40,
			"cpu": 1, "queue_cpu": 0.5}},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}, "secrets": []any{}})
	if d.Status != 201 {
		t.Fatalf("create: %d %s", d.Status, d.Body)
	}
	dep := d.Map()["id"].(string)
	dbName := "slipway_dep_" + strings.ReplaceAll(dep, "-", "")
	user, prefix := "slipway-dep-"+dep, "slipway:"+dep+":"
	redisAdmin := servertest.RedisClient(t, rdAdmin)
	t.Cleanup(func() { servertest.DropAgentDatabase(t, pgAdmin, dbName) })
	t.Cleanup(func() { redisAdmin.Do(context.Background(), "acl", "deluser", user) })
	rev := deploySource(t, s, dep, appFiles(t, ""))
	revLogs := func() string { return string(s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev+"/logs", nil).Body) }
	if st := waitStatus(t, s, dep, rev); st != "DEPLOYED" {
		t.Fatalf("revision ended %s:\n%s\n%s", st, revLogs(), s.Logs())
	}
	for _, want := range []string{"2 API replicas (role api) and 2 queue workers", "replica api-1 (role api) is serving", "replica queue-1 (role queue) is serving"} {
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(revLogs(), want); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("the deploy log does not say %q", want)
				break
			}
		}
	}

	// The four containers, as the engine reports them.
	ctx := context.Background()
	type agent struct {
		id, name, role, pgUser, redisUser, prefix, conns string
		shares                                           int64
		pid                                              int
	}
	// agents lists the deployment's agent containers by replica, and how
	// many there are of any revision.
	agents := func() (map[string]agent, int) {
		t.Helper()
		out, n := map[string]agent{}, 0
		for _, id := range agentContainers(t, dep, "agent") {
			r, err := engine(t).ContainerInspect(ctx, id, client.ContainerInspectOptions{})
			if cerrdefs.IsNotFound(err) {
				continue // a previous revision's, removed just now
			} else if err != nil {
				t.Fatal(err)
			}
			n++
			c := r.Container
			if c.Config.Labels[docker.LabelRevision] != rev {
				continue
			}
			env := map[string]string{}
			for _, kv := range c.Config.Env {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
			replica := c.Config.Labels[docker.LabelReplica]
			if env["SLIPWAY_AGENT_WORKER_ID"] != replica || c.Config.Labels[docker.LabelReplicaRole] != env["SLIPWAY_AGENT_ROLE"] {
				t.Errorf("container %s: labels %v do not match its environment (worker %q, role %q)", c.Name, c.Config.Labels,
					env["SLIPWAY_AGENT_WORKER_ID"], env["SLIPWAY_AGENT_ROLE"])
			}
			a := agent{id: id, name: strings.TrimPrefix(c.Name, "/"), role: env["SLIPWAY_AGENT_ROLE"], prefix: env["SLIPWAY_AGENT_REDIS_PREFIX"],
				conns: env["SLIPWAY_AGENT_DB_MAX_CONNECTIONS"], shares: c.HostConfig.CPUShares}
			if c.State != nil && c.State.Running {
				a.pid = c.State.Pid
			}
			if u, err := neturl.Parse(env["SLIPWAY_AGENT_POSTGRES_URL"]); err == nil && u.User != nil && u.Path == "/"+dbName {
				a.pgUser = u.User.Username()
			}
			if u, err := neturl.Parse(env["SLIPWAY_AGENT_REDIS_URL"]); err == nil && u.User != nil {
				a.redisUser = u.User.Username()
			}
			out[replica] = a
			checkHardened(t, "replica "+replica, c, true)
		}
		return out, n
	}
	checkAgents := func() map[string]agent {
		t.Helper()
		// The previous revision's containers go shortly after the new
		// one is DEPLOYED.
		got, n := agents()
		for deadline := time.Now().Add(30 * time.Second); n != 4 && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			got, n = agents()
		}
		for _, id := range []string{"api-0", "api-1", "queue-0", "queue-1"} {
			a, ok := got[id]
			role, shares := strings.TrimRight(id, "-01"), int64(1024)
			if role == "queue" {
				shares = 512
			}
			if !ok || a.name != "slipway-"+dep+"-"+rev+"-"+id || a.role != role || a.pgUser != dbName || a.redisUser != user ||
				a.prefix != prefix || a.conns != "10" || a.shares != shares {
				t.Errorf("container %s: %+v (found %t), want role %s on %s, Redis user %s prefix %s, 10 connections, cpu shares %d",
					id, a, ok, role, dbName, user, prefix, shares)
			}
		}
		if len(got) != 4 || n != 4 {
			t.Fatalf("want 4 agent containers, of revision %s: %d, %+v", rev, n, got)
		}
		return got
	}
	first := checkAgents()

	// Requests through the proxy, counted per replica by request id.
	base := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["url"].(string)
	send := requestSender(t, s, base, "dscale")
	served := func(ids []string) map[string]int { t.Helper(); return servedBy(t, s, dep, ids) }
	if got := served(send(20)); got["api-0"] != 10 || got["api-1"] != 10 {
		t.Fatalf("20 requests were served %v, want 10 by each API container", got)
	}

	// Runs created through the API replicas execute on the workers.
	for i := range 4 {
		th := servertest.Do(t, "POST", base+"/threads", map[string]any{}, "X-Api-Key", s.Key).Map()["thread_id"].(string)
		msg := fmt.Sprintf("hello %d", i)
		r := servertest.Do(t, "POST", base+"/threads/"+th+"/runs/wait", map[string]any{"assistant_id": "agent",
			"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": msg}}}}, "X-Api-Key", s.Key)
		if r.Status != 200 || !strings.Contains(string(r.Body), msg) {
			t.Fatalf("run %d: %d %s", i, r.Status, r.Body)
		}
		runs := servertest.Do(t, "GET", base+"/threads/"+th+"/runs", nil, "X-Api-Key", s.Key).JSON().([]any)
		md := runs[0].(map[string]any)["metadata"].(map[string]any)
		if w := fmt.Sprint(md["worker"]); w != "queue-0" && w != "queue-1" {
			t.Fatalf("run %d ran on %v, not on a queue container", i, md["worker"])
		}
	}

	// The official SDK suites, JS and Python, through the deployment URL.
	runSDKSuite(t, base, s.Key)

	// api-1's process killed (a crash: the restart policy applies, as it
	// does not to a stop through the engine's API): the requests keep
	// succeeding, through api-0.
	if os.Geteuid() != 0 {
		t.Log("not root: the agent's process (another uid) cannot be killed to check the replica's healing")
	} else {
		if err := syscall.Kill(first["api-1"].pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if got := served(send(10)); got["api-0"]+got["api-1"] != 10 {
			t.Fatalf("with api-1 killed, the requests were served %v", got)
		}
		// Healed: api-1 runs again (a new process in the same container)
		// and gets requests again.
		deadline := time.Now().Add(60 * time.Second)
		for {
			now, _ := agents()
			var got map[string]int
			if a := now["api-1"]; a.pid != 0 && a.pid != first["api-1"].pid && a.id == first["api-1"].id {
				if got = served(send(6)); got["api-1"] > 0 && got["api-0"] > 0 {
					break
				}
			}
			if time.Now().After(deadline) {
				r, _ := engine(t).ContainerInspect(ctx, first["api-1"].id, client.ContainerInspectOptions{})
				if r.Container.State != nil {
					t.Logf("api-1: %+v, restarted %d times", *r.Container.State, r.Container.RestartCount)
				}
				t.Fatalf("api-1 did not come back into the rotation (was pid %d, now %+v; last requests served %v):\n%s",
					first["api-1"].pid, now["api-1"], got, servertest.LinesWith(s.Logs(), dep))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	// A new revision replaces all four containers.
	rev = deploySource(t, s, dep, appFiles(t, ""))
	if st := waitStatus(t, s, dep, rev); st != "DEPLOYED" {
		t.Fatalf("revision 2 ended %s:\n%s", st, revLogs())
	}
	second := checkAgents()
	for id, a := range second {
		if a.id == first[id].id {
			t.Errorf("container %s of the first revision still serves", id)
		}
	}
	if got := served(send(10)); got["api-0"] != 5 || got["api-1"] != 5 {
		t.Fatalf("after the redeploy 10 requests were served %v", got)
	}

	// A revision whose agents never become healthy fails its deploy: the
	// previous group, stopped for the handover, is started again (the same
	// four containers) and serves.
	bad := deploySource(t, s, dep, map[string]string{"langgraph.json": `{"graphs": {"agent": {"builtin": "no-such-graph"}}}`})
	if st := waitStatus(t, s, dep, bad); st != "DEPLOY_FAILED" {
		t.Fatalf("the unhealthy revision ended %s", st)
	}
	back := checkAgents()
	for id, a := range back {
		if a.id != second[id].id || a.pid == 0 {
			t.Errorf("after the failed deploy, container %s is %s (pid %d), want %s running again", id, a.id, a.pid, second[id].id)
		}
	}
	if got := served(send(10)); got["api-0"] != 5 || got["api-1"] != 5 {
		t.Fatalf("after the failed deploy 10 requests were served %v", got)
	}

	// A restart of Slipway adopts the four running containers (found by
	// their replica labels) rather than starting new ones, and spreads
	// requests over both API containers again.
	s.Restart()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if servertest.Do(t, "GET", base+"/ok", nil, "X-Api-Key", s.Key).Status == 200 &&
			s.Do("GET", "/v2/deployments/"+dep, nil).Map()["status"] == "READY" {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("not restored after a restart of Slipway:\n%s", servertest.LinesWith(s.Logs(), dep))
		}
	}
	adopted := checkAgents()
	for id, a := range adopted {
		if a.id != back[id].id || a.pid != back[id].pid {
			t.Errorf("after the restart, container %s is %s (pid %d), want %s (pid %d) adopted", id, a.id, a.pid, back[id].id, back[id].pid)
		}
	}
	if got := served(send(10)); got["api-0"] != 5 || got["api-1"] != 5 {
		t.Fatalf("after the restart 10 requests were served %v", got)
	}

	// Deleted: nothing left.
	if r := s.Do("DELETE", "/v2/deployments/"+dep, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	deadline := time.Now().Add(60 * time.Second)
	for s.Do("GET", "/v2/deployments/"+dep, nil).Status != 404 {
		if time.Now().After(deadline) {
			t.Fatalf("not deleted:\n%s", s.Logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if left := leftovers(t, s, "docker", dep); len(left) != 0 {
		t.Fatalf("left of the deployment: %v", left)
	}
	if n := servertest.PostgresCount(t, pgAdmin, "select (select count(*) from pg_database where datname = '"+dbName+"') + (select count(*) from pg_roles where rolname = '"+dbName+"')"); n != 0 {
		t.Fatalf("the database or its role is left (%d)", n)
	}
	if users, keys := servertest.RedisLeft(t, redisAdmin, user, prefix); users != 0 || keys != 0 {
		t.Fatalf("left on Redis: %d users, %d keys", users, keys)
	}
}

// bridgeURL is admin with its host replaced by a forwarder to it that
// listens on the default docker bridge's gateway: an address of the host
// that containers on any bridge network reach, while the test servers
// listen on loopback only.
func bridgeURL(t *testing.T, admin string) string {
	t.Helper()
	u, err := neturl.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = forwardOn(t, servertest.BridgeGateway(t).String(), u.Host)
	return u.String()
}
