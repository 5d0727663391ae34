package processtest_test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"slipway/server/servertest"
)

// TestProcessScaledDeployment: a deployment with min_scale 2 and
// queue_min_scale 2 on the process runtime, with PostgreSQL and Redis
// configured, runs four agent processes: api-0 and api-1 (role api) and
// queue-0 and queue-1 (role queue), each with its own address and worker
// id, all on the deployment's database and Redis user and prefix. The
// proxy spreads requests over the two API replicas and none to the
// workers (counted by request id in the agent log, whose lines name the
// replica), and the official JS and Python SDK suites pass through the
// deployment URL; with one API replica killed, requests keep succeeding through
// the other while its supervisor brings it back, after which it gets
// requests again. Deleting the deployment leaves no process, no database
// or role, no Redis user and no key under its prefix.
//
// What the agents do with their roles (API replicas never executing runs,
// workers serving only /ok and /metrics, events crossing processes through
// Redis) is the agent's side and tested there; this checks what the
// control plane and the runtime give them.
func TestProcessScaledDeployment(t *testing.T) {
	requireRuntime(t, "process")
	pg := servertest.PostgresAdminURL(t)
	rd := servertest.RedisAdminURL(t)
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "process", "SLIPWAY_POSTGRES_URL": pg, "SLIPWAY_REDIS_URL": rd})
	sd := createScaled(t, s, pg, rd, "scaled", map[string]any{"min_scale": 2, "queue_min_scale": 2, "db_max_connections": 8})
	dep, dbName, user, prefix := sd.id, sd.dbName, sd.user, sd.prefix
	redisAdmin := servertest.RedisClient(t, rd)
	rev := deploySource(t, s, dep, appFiles(t, ""))
	firstRev := rev
	revLogs := func() string { return string(s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev+"/logs", nil).Body) }
	if st := waitStatus(t, s, dep, rev); st != "DEPLOYED" {
		t.Fatalf("revision ended %s:\n%s\n%s", st, revLogs(), s.Logs())
	}
	// The deploy log's last lines are stored shortly after the revision
	// reports DEPLOYED.
	for _, want := range []string{"2 API replicas (role api) and 2 queue workers", "replica api-1 (role api) is serving", "replica queue-1 (role queue) is serving"} {
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(revLogs(), want); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("the deploy log does not say %q", want)
				break
			}
		}
	}

	// The four agents, as their environments say.
	depDir := sd.depDir
	type agentEnv struct{ role, addr, pgUser, redisUser, prefix, conns string }
	agents := func() (map[string]agentEnv, map[string][]int) {
		envs := map[string]agentEnv{}
		raw, pids := replicaProcesses(t, depDir)
		for id, env := range raw {
			pgu, _ := url.Parse(env["SLIPWAY_AGENT_POSTGRES_URL"])
			ru, _ := url.Parse(env["SLIPWAY_AGENT_REDIS_URL"])
			a := agentEnv{role: env["SLIPWAY_AGENT_ROLE"], addr: env["SLIPWAY_AGENT_ADDR"], prefix: env["SLIPWAY_AGENT_REDIS_PREFIX"],
				conns: env["SLIPWAY_AGENT_DB_MAX_CONNECTIONS"]}
			if pgu != nil && pgu.User != nil && pgu.Path == "/"+dbName {
				a.pgUser = pgu.User.Username()
			}
			if ru != nil && ru.User != nil {
				a.redisUser = ru.User.Username()
			}
			envs[id] = a
		}
		return envs, pids
	}
	envs, pids := agents()
	addrs := map[string]bool{}
	for _, id := range []string{"api-0", "api-1", "queue-0", "queue-1"} {
		a, ok := envs[id]
		role := strings.TrimRight(id, "-01")
		if !ok || a.role != role || a.pgUser != dbName || a.redisUser != user || a.prefix != prefix || a.conns != "2" {
			t.Errorf("agent %s: %+v (found %t), want role %s on %s, Redis user %s prefix %s, 2 connections", id, a, ok, role, dbName, user, prefix)
		}
		addrs[a.addr] = true
	}
	if len(envs) != 4 || len(addrs) != 4 {
		t.Fatalf("want 4 agents on 4 addresses: %+v", envs)
	}

	// Requests through the proxy, counted per replica by request id.
	base := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["url"].(string)
	send := requestSender(t, s, base, "scale")
	served := func(ids []string) map[string]int { t.Helper(); return servedBy(t, s, dep, ids) }
	if got := served(send(20)); got["api-0"] != 10 || got["api-1"] != 10 {
		t.Fatalf("20 requests were served %v, want 10 by each API replica", got)
	}

	// The official SDK suites, JS and Python, through the deployment URL:
	// every multitask strategy, streams, cancel, crons, across two API
	// replicas with the runs on the two workers.
	runSDKSuite(t, base, s.Key)

	// api-1 killed: the requests keep succeeding, through api-0.
	for _, pid := range pids["api-1"] {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	if got := served(send(10)); got["api-0"]+got["api-1"] != 10 {
		t.Fatalf("with api-1 killed, the requests were served %v", got)
	}
	// Healed: api-1 runs again (a new process) and gets requests again.
	deadline := time.Now().Add(30 * time.Second)
	for {
		envs, now := agents()
		if len(now["api-1"]) > 0 && now["api-1"][0] != pids["api-1"][0] && envs["api-1"].role == "api" {
			if got := served(send(6)); got["api-1"] > 0 && got["api-0"] > 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("api-1 did not come back into the rotation:\n%s", s.Logs())
		}
		time.Sleep(200 * time.Millisecond)
	}

	// A new revision replaces the whole group: four new agents with the
	// same worker ids, none of the old ones left, requests still spread.
	_, old := agents()
	rev = deploySource(t, s, dep, appFiles(t, ""))
	if st := waitStatus(t, s, dep, rev); st != "DEPLOYED" {
		t.Fatalf("revision 2 ended %s:\n%s", st, revLogs())
	}
	envs, now := agents()
	for _, id := range []string{"api-0", "api-1", "queue-0", "queue-1"} {
		if len(now[id]) == 0 || envs[id].role != strings.TrimRight(id, "-01") {
			t.Errorf("after the redeploy, agent %s: %+v", id, envs[id])
		}
		for _, pid := range old[id] {
			if _, err := os.Stat(filepath.Join("/proc", fmt.Sprint(pid))); err == nil && slices.Contains(now[id], pid) {
				t.Errorf("agent %s of the previous revision (pid %d) still runs", id, pid)
			}
		}
	}
	if len(envs) != 4 {
		t.Fatalf("after the redeploy: %+v", envs)
	}
	if got := served(send(10)); got["api-0"] != 5 || got["api-1"] != 5 {
		t.Fatalf("after the redeploy 10 requests were served %v", got)
	}

	// A rollback to the first revision, then a restart of Slipway (which
	// restores the active revision, its Redis user reset to the same
	// password): four agents again, requests spread over both API replicas.
	rev2 := rev
	if r := s.Do("POST", "/v2/deployments/"+dep+"/revisions/"+firstRev+"/redeploy", nil); r.Status != 200 {
		t.Fatalf("rollback: %d %s", r.Status, r.Body)
	}
	waitActive(t, s, dep, firstRev)
	if _, now := agents(); len(now) != 4 {
		t.Fatalf("after the rollback from %s: agents %v", rev2, now)
	}
	s.Restart()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if envs, _ := agents(); len(envs) == 4 && len(servertest.Do(t, "GET", base+"/ok", nil, "X-Api-Key", s.Key).Body) > 0 &&
			s.Do("GET", "/v2/deployments/"+dep, nil).Map()["status"] == "READY" {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("not restored after a restart of Slipway: %v\n%s", envs, s.Logs())
		}
	}
	if got := served(send(10)); got["api-0"] != 5 || got["api-1"] != 5 {
		t.Fatalf("after the restart 10 requests were served %v", got)
	}
	if _, now := agents(); len(now) != 4 || len(now["api-0"]) != 1 || len(now["api-1"]) != 1 || len(now["queue-0"]) != 1 || len(now["queue-1"]) != 1 {
		t.Fatalf("after the restart, one agent per replica expected: %v", now)
	}

	// Deleted: nothing left.
	if r := s.Do("DELETE", "/v2/deployments/"+dep, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	deadline = time.Now().Add(60 * time.Second)
	for s.Do("GET", "/v2/deployments/"+dep, nil).Status != 404 {
		if time.Now().After(deadline) {
			t.Fatalf("not deleted:\n%s", s.Logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if left := agentProcesses(t, depDir); len(left) != 0 {
		sort.Strings(left)
		t.Fatalf("processes left: %v", left)
	}
	if n := servertest.PostgresCount(t, pg, "select (select count(*) from pg_database where datname = '"+dbName+"') + (select count(*) from pg_roles where rolname = '"+dbName+"')"); n != 0 {
		t.Fatalf("the database or its role is left (%d)", n)
	}
	if users, keys := servertest.RedisLeft(t, redisAdmin, user, prefix); users != 0 || keys != 0 {
		t.Fatalf("left on Redis: %d users, %d keys", users, keys)
	}
}
