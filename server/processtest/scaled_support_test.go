package processtest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"slipway/server/servertest"
)

// What the tests of scaled deployments on the process runtime share:
// creating one over the test's PostgreSQL and Redis, finding its agent
// processes, and telling which replica served a request.

// scaledDeployment is a deployment created with a resource_spec that
// scales it, and the names the control plane provisions for it.
type scaledDeployment struct {
	id     string
	dbName string // its database, and the database's role
	user   string // its Redis user
	prefix string // its Redis key prefix
	depDir string // the process runtime's directory of it
}

// createScaled creates a deployment named name with resource_spec spec
// on s (started with SLIPWAY_POSTGRES_URL pg and SLIPWAY_REDIS_URL rd);
// its database and Redis user are dropped when the test ends, whatever
// the test leaves.
func createScaled(t *testing.T, s *servertest.Server, pg, rd, name string, spec map[string]any) scaledDeployment {
	t.Helper()
	d := s.Do("POST", "/v2/deployments", map[string]any{"name": name, "source": "internal_source",
		"source_config":          map[string]any{"resource_spec": spec},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}, "secrets": []any{}})
	if d.Status != 201 {
		t.Fatalf("create: %d %s", d.Status, d.Body)
	}
	dep := d.Map()["id"].(string)
	sd := scaledDeployment{id: dep, dbName: "slipway_dep_" + strings.ReplaceAll(dep, "-", ""),
		user: "slipway-dep-" + dep, prefix: "slipway:" + dep + ":", depDir: filepath.Join(s.DataDir, "deployments", dep)}
	redisAdmin := servertest.RedisClient(t, rd)
	t.Cleanup(func() { servertest.DropAgentDatabase(t, pg, sd.dbName) })
	t.Cleanup(func() { redisAdmin.Do(t.Context(), "acl", "deluser", sd.user) })
	return sd
}

// replicaProcesses lists the agent processes of a deployment by worker id
// (api-0, queue-1, ...), as their environments say: each one's
// environment, and its pids (more than one while a replaced agent is
// still exiting). Language hosts and other processes working in the
// directory are left out.
func replicaProcesses(t testing.TB, depDir string) (map[string]map[string]string, map[string][]int) {
	t.Helper()
	envs, pids := map[string]map[string]string{}, map[string][]int{}
	for _, pid := range agentProcesses(t, depDir) {
		raw, _ := os.ReadFile(filepath.Join("/proc", pid, "environ"))
		env := map[string]string{}
		for _, kv := range bytes.Split(raw, []byte{0}) {
			k, v, _ := strings.Cut(string(kv), "=")
			env[k] = v
		}
		id := env["SLIPWAY_AGENT_WORKER_ID"]
		if id == "" || env["SLIPWAY_AGENT_ADDR"] == "" {
			continue // a language host or a process that is not an agent
		}
		n, err := strconv.Atoi(pid)
		if err != nil {
			continue
		}
		pids[id] = append(pids[id], n)
		envs[id] = env
	}
	return envs, pids
}

// killReplica kills every process of the replica id with SIGKILL: the
// agent and what it runs (a command graph's processes inherit its
// environment and directory), as an OOM kill of its cgroup would. They
// are all stopped before any is killed: /proc lists them in the order of
// their names, not parent first, and a graph's process killed while its
// agent still ran would let the agent record the run as failed, which is
// another event than the one under test. A process may be gone by its
// turn, ended with the agent.
func killReplica(t testing.TB, depDir, id string) {
	t.Helper()
	_, pids := replicaProcesses(t, depDir)
	if len(pids[id]) == 0 {
		t.Fatalf("no process of replica %s", id)
	}
	for _, sig := range []syscall.Signal{syscall.SIGSTOP, syscall.SIGKILL} {
		for _, pid := range pids[id] {
			if err := syscall.Kill(pid, sig); err != nil && err != syscall.ESRCH {
				t.Fatalf("kill -%d %s (pid %d): %v", sig, id, pid, err)
			}
		}
	}
}

// servedBy waits until the deployment's agent log has every request id
// (the agents' access log lines carry the id sent as X-Request-Id, the
// log lines the name of the replica: "[api-0] {...}") and counts the
// requests each replica served; an id not found within 30 s counts under "".
func servedBy(t testing.TB, s *servertest.Server, dep string, ids []string) map[string]int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var body struct {
			Logs []struct {
				Message string `json:"message"`
			} `json:"logs"`
		}
		if err := json.Unmarshal(s.Do("GET", "/v2/deployments/"+dep+"/logs", nil).Body, &body); err != nil {
			t.Fatal(err)
		}
		by := map[string]string{}
		for _, l := range body.Logs {
			name, rest, ok := strings.Cut(strings.TrimPrefix(l.Message, "["), "] ")
			if !ok || !strings.HasPrefix(l.Message, "[") {
				continue
			}
			for _, id := range ids {
				if strings.Contains(rest, `"request_id":"`+id+`"`) {
					by[id] = name
				}
			}
		}
		if len(by) == len(ids) || time.Now().After(deadline) {
			count := map[string]int{}
			for _, id := range ids {
				count[by[id]]++
			}
			return count
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// requestSender returns a function that sends n requests (POST
// /assistants/search) through the deployment URL base, each with an
// X-Request-Id of its own (tag, the call's number, the request's), and
// returns their ids for servedBy.
func requestSender(t testing.TB, s *servertest.Server, base, tag string) func(n int) []string {
	round := 0
	return func(n int) []string {
		t.Helper()
		round++
		ids := make([]string, n)
		for i := range n {
			ids[i] = fmt.Sprintf("%s-%d-%d", tag, round, i)
			r := servertest.Do(t, "POST", base+"/assistants/search", map[string]any{}, "X-Api-Key", s.Key, "X-Request-Id", ids[i])
			if r.Status != 200 {
				t.Fatalf("request %s: %d %s", ids[i], r.Status, r.Body)
			}
		}
		return ids
	}
}

// raceReject creates 50 runs of assistant on thread th at once with
// multitask_strategy reject, spread over urls (agents, or one deployment
// URL), each request with headers, and fails unless exactly one was
// admitted (200) and the 49 others refused (409).
func raceReject(t testing.TB, urls []string, th, assistant string, headers ...string) {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{"assistant_id": assistant, "input": map[string]any{}, "multitask_strategy": "reject"})
	codes := make([]int, 50)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", urls[i%len(urls)]+"/threads/"+th+"/runs", bytes.NewReader(raw))
			req.Header.Set("Content-Type", "application/json")
			for j := 0; j+1 < len(headers); j += 2 {
				req.Header.Set(headers[j], headers[j+1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes[i] = resp.StatusCode
		})
	}
	wg.Wait()
	count := map[int]int{}
	for _, c := range codes {
		count[c]++
	}
	if count[200] != 1 || count[409] != 49 {
		t.Fatalf("statuses %v, want one 200 and 49 409", count)
	}
}

// rejectRace makes a thread through creator, races 50 creations of a
// "slow" run with multitask_strategy reject on it over urls (raceReject:
// one 200, 49 409), then checks through reader that the thread holds that
// one run, and cancels it.
func rejectRace(t *testing.T, creator, reader agentClient, urls []string, headers ...string) {
	t.Helper()
	th := newThread(t, creator)
	raceReject(t, urls, th, "slow", headers...)
	runs := reader.Do("GET", "/threads/"+th+"/runs", nil).JSON().([]any)
	if len(runs) != 1 {
		t.Fatalf("%d runs on the thread, want 1", len(runs))
	}
	run := runs[0].(map[string]any)["run_id"].(string)
	if r := reader.Do("POST", "/threads/"+th+"/runs/"+run+"/cancel?wait=1", nil); r.Status >= 300 {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
}
