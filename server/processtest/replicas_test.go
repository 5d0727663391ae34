package processtest_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"slipway/server/servertest"
)

// ticksScript is a command graph that streams: TICKS (10 by default)
// custom events 0.2 s apart, then one update.
const ticksScript = `#!/bin/sh
n=${TICKS:-10}
i=1
while [ $i -le $n ]; do
  echo "{\"event\": \"custom\", \"data\": {\"tick\": $i}}"
  sleep 0.2
  i=$((i+1))
done
echo '{"event": "updates", "node": "ticks", "data": {"done": true}}'
`

// replicaApp is a project whose graphs stream: ticks emits 10 custom
// events 0.2 s apart, slow 40, each then one update; agent is the echo.
func replicaApp(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ticks.sh"), []byte(ticksScript), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := `{"graphs": {"ticks": {"command": ["./ticks.sh"]}, "slow": {"command": ["sh", "-c", "TICKS=40 exec ./ticks.sh"]}, "agent": {"builtin": "echo"}}}`
	if err := os.WriteFile(filepath.Join(dir, "langgraph.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runEvent is one server-sent event as a client reads it.
type runEvent struct {
	ID    int
	Event string
	Data  string
}

// readRunSSE reads events from body until it ends or fails, handing each to
// fn (false stops reading).
func readRunSSE(body io.Reader, fn func(runEvent) bool) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var ev runEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.Event != "" && !fn(ev) {
				return
			}
			ev = runEvent{}
		case strings.HasPrefix(line, "event: "):
			ev.Event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.Data = strings.TrimPrefix(line, "data: ")
		case strings.HasPrefix(line, "id: "):
			ev.ID, _ = strconv.Atoi(strings.TrimPrefix(line, "id: "))
		}
	}
}

// openRunSSE sends a request answered by a stream of events.
func openRunSSE(t *testing.T, method, url string, body any, headers ...string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	return resp
}

// streamAll is every event of a stream, for comparisons: the run's id in
// the metadata event is left out (two runs of the same graph compare
// equal).
func streamAll(t *testing.T, method, url string, body any, headers ...string) []runEvent {
	t.Helper()
	resp := openRunSSE(t, method, url, body, headers...)
	defer resp.Body.Close()
	var out []runEvent
	readRunSSE(resp.Body, func(ev runEvent) bool { out = append(out, ev); return true })
	return out
}

func comparableEvents(evs []runEvent) []runEvent {
	out := make([]runEvent, len(evs))
	for i, ev := range evs {
		if ev.Event == "metadata" {
			var m map[string]any
			_ = json.Unmarshal([]byte(ev.Data), &m)
			delete(m, "run_id")
			raw, _ := json.Marshal(m)
			ev.Data = string(raw)
		}
		out[i] = ev
	}
	return out
}

// agentClient is where the helpers below send their requests: an agent
// (servertest.Agent) or a deployment's URL through the proxy.
type agentClient interface {
	Do(method, path string, body any, headers ...string) *servertest.Response
}

func newThread(t *testing.T, a agentClient) string {
	t.Helper()
	r := a.Do("POST", "/threads", map[string]any{})
	if r.Status != 200 {
		t.Fatalf("create thread: %d %s", r.Status, r.Body)
	}
	return r.Map()["thread_id"].(string)
}

// runOf reads a run through a replica.
func runOf(t *testing.T, a agentClient, thread, run string) map[string]any {
	t.Helper()
	r := a.Do("GET", "/threads/"+thread+"/runs/"+run, nil)
	if r.Status != 200 {
		t.Fatalf("get run: %d %s", r.Status, r.Body)
	}
	return r.Map()
}

// waitRunning waits until a worker has claimed the run, and returns the worker.
func waitRunning(t *testing.T, a agentClient, thread, run string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		r := runOf(t, a, thread, run)
		md, _ := r["metadata"].(map[string]any)
		if w, _ := md["worker"].(string); w != "" && r["status"] == "running" {
			return w
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("run %s was not claimed by a worker within 20 s", run)
	return ""
}

// checkRetriedOnce checks a run that was taken over once after its
// worker died: its stream (evs) has increasing ids, a metadata event for
// attempts 1 and 2 and a single final update, and its thread th holds as
// many checkpoints as one run of ticks on a new thread through a: it
// completed once.
func checkRetriedOnce(t *testing.T, a agentClient, th string, evs []runEvent) {
	t.Helper()
	var attempts []string
	ends, last := 0, 0
	for _, ev := range evs {
		if ev.ID <= last {
			t.Fatalf("event ids not increasing: %d after %d", ev.ID, last)
		}
		last = ev.ID
		switch ev.Event {
		case "metadata":
			attempts = append(attempts, ev.Data)
		case "updates":
			ends++
		}
	}
	if len(attempts) != 2 || !strings.Contains(attempts[0], `"attempt":1`) || !strings.Contains(attempts[1], `"attempt":2`) || ends != 1 {
		t.Fatalf("stream of the retried run: attempts %v, %d final updates", attempts, ends)
	}
	once := newThread(t, a)
	if r := a.Do("POST", "/threads/"+once+"/runs/wait", map[string]any{"assistant_id": "ticks", "input": map[string]any{}}); r.Status != 200 {
		t.Fatalf("reference run: %d %s", r.Status, r.Body)
	}
	h1 := a.Do("POST", "/threads/"+th+"/history", map[string]any{"limit": 100}).JSON().([]any)
	h2 := a.Do("POST", "/threads/"+once+"/history", map[string]any{"limit": 100}).JSON().([]any)
	if len(h1) != len(h2) || len(h1) == 0 {
		t.Fatalf("the retried run left %d checkpoints, one run leaves %d", len(h1), len(h2))
	}
}

// TestAgentReplicas runs a deployment as processes: two `slipway agent`
// API replicas and two queue workers over one fresh PostgreSQL schema and
// one fresh Redis prefix (a lease of 3 s, so a dead worker's run is taken
// over within seconds).
func TestAgentReplicas(t *testing.T) {
	pg := servertest.PostgresSchemaURL(t)
	redisURL, prefix := servertest.RedisPrefix(t)
	dir := replicaApp(t)
	cfg := filepath.Join(dir, "langgraph.json")
	start := func(name, role string) *servertest.Agent {
		return servertest.StartAgent(t, map[string]string{"SLIPWAY_GRAPH_CONFIG": cfg,
			"SLIPWAY_AGENT_POSTGRES_URL": pg, "SLIPWAY_AGENT_REDIS_URL": redisURL, "SLIPWAY_AGENT_REDIS_PREFIX": prefix,
			"SLIPWAY_AGENT_ROLE": role, "SLIPWAY_AGENT_WORKER_ID": name, "SLIPWAY_AGENT_RUN_LEASE_SECONDS": "3"})
	}
	apiA, apiB := start("api-a", "api"), start("api-b", "api")
	workers := map[string]*servertest.Agent{"worker-a": start("worker-a", "queue"), "worker-b": start("worker-b", "queue")}
	apis := []*servertest.Agent{apiA, apiB}

	t.Run("queue workers serve no API", func(t *testing.T) {
		// Plain requests: the servertest client checks answers against
		// the API's OpenAPI document, which a worker does not serve.
		for _, w := range workers {
			for path, want := range map[string]int{"/ok": 200, "/metrics": 200, "/threads/search": 404, "/assistants/search": 404} {
				resp, err := http.Post(w.URL+path, "application/json", strings.NewReader("{}"))
				if path == "/ok" || path == "/metrics" {
					resp, err = http.Get(w.URL + path)
				}
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != want {
					t.Fatalf("%s on a queue worker: %d, want %d", path, resp.StatusCode, want)
				}
			}
		}
	})

	t.Run("runs created through either replica execute on the workers", func(t *testing.T) {
		for i := range 6 {
			th := newThread(t, apis[i%2])
			msg := fmt.Sprintf("hello %d", i)
			r := apis[(i+1)%2].Do("POST", "/threads/"+th+"/runs/wait", map[string]any{"assistant_id": "agent",
				"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": msg}}}})
			if r.Status != 200 || !strings.Contains(string(r.Body), msg) {
				t.Fatalf("run %d: %d %s", i, r.Status, r.Body)
			}
			runs := apis[i%2].Do("GET", "/threads/"+th+"/runs", nil).JSON().([]any)
			md := runs[0].(map[string]any)["metadata"].(map[string]any)
			if _, ok := workers[fmt.Sprint(md["worker"])]; !ok || md["attempt"] != float64(1) {
				t.Fatalf("run %d ran on %v (attempt %v), not on a queue worker", i, md["worker"], md["attempt"])
			}
		}
	})

	t.Run("a client streaming from a replica gets every event of a run on a worker", func(t *testing.T) {
		single := servertest.StartAgent(t, map[string]string{"SLIPWAY_GRAPH_CONFIG": cfg})
		body := map[string]any{"assistant_id": "ticks", "input": map[string]any{}, "stream_mode": []string{"values", "updates", "custom"}}
		want := comparableEvents(streamAll(t, "POST", single.URL+"/threads/"+newThread(t, single)+"/runs/stream", body))
		got := comparableEvents(streamAll(t, "POST", apiA.URL+"/threads/"+newThread(t, apiB)+"/runs/stream", body))
		if len(want) < 12 || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("across processes:\n%v\none process:\n%v", got, want)
		}
	})

	t.Run("cancel on one replica stops the run on its worker", func(t *testing.T) {
		th := newThread(t, apiA)
		run := apiA.Do("POST", "/threads/"+th+"/runs", map[string]any{"assistant_id": "slow", "input": map[string]any{}}).Map()["run_id"].(string)
		waitRunning(t, apiB, th, run)
		began := time.Now()
		if r := apiB.Do("POST", "/threads/"+th+"/runs/"+run+"/cancel?wait=1", nil); r.Status >= 300 {
			t.Fatalf("cancel: %d %s", r.Status, r.Body)
		}
		if r := apiA.Do("GET", "/threads/"+th+"/runs/"+run+"/join", nil); r.Status != 200 {
			t.Fatalf("join: %d %s", r.Status, r.Body)
		}
		if took := time.Since(began); took > 5*time.Second {
			t.Fatalf("the run took %v to stop", took)
		}
		if st := runOf(t, apiA, th, run)["status"]; st != "interrupted" {
			t.Fatalf("cancelled run is %v", st)
		}
		if st := apiB.Do("GET", "/threads/"+th, nil).Map()["status"]; st == "busy" {
			t.Fatal("the thread stayed busy")
		}
	})

	t.Run("interrupt and rollback strategies stop a run on a worker", func(t *testing.T) {
		for _, strategy := range []string{"interrupt", "rollback"} {
			th := newThread(t, apiA)
			first := apiA.Do("POST", "/threads/"+th+"/runs", map[string]any{"assistant_id": "slow", "input": map[string]any{}}).Map()["run_id"].(string)
			waitRunning(t, apiA, th, first)
			r := apiB.Do("POST", "/threads/"+th+"/runs/wait", map[string]any{"assistant_id": "agent", "multitask_strategy": strategy,
				"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "second"}}}})
			if r.Status != 200 || !strings.Contains(string(r.Body), "second") {
				t.Fatalf("%s: the newer run: %d %s", strategy, r.Status, r.Body)
			}
			got := apiA.Do("GET", "/threads/"+th+"/runs/"+first, nil)
			switch {
			case strategy == "interrupt" && (got.Status != 200 || got.Map()["status"] != "interrupted"):
				t.Fatalf("interrupt: the first run: %d %s", got.Status, got.Body)
			case strategy == "rollback" && got.Status != 404:
				t.Fatalf("rollback: the first run is still there: %d %s", got.Status, got.Body)
			}
		}
	})

	t.Run("reject answers 409 to all but one of 50 racing creations on two replicas", func(t *testing.T) {
		rejectRace(t, apiA, apiB, []string{apis[0].URL, apis[1].URL})
	})

	t.Run("kill -9 of an API replica mid-stream: the client resumes on another with Last-Event-ID", func(t *testing.T) {
		apiC := start("api-c", "api")
		th := newThread(t, apiA)
		modes := []string{"values", "updates", "custom"}
		resp := openRunSSE(t, "POST", apiC.URL+"/threads/"+th+"/runs/stream", map[string]any{"assistant_id": "slow", "input": map[string]any{},
			"stream_mode": modes, "stream_resumable": true})
		var first []runEvent
		readRunSSE(resp.Body, func(ev runEvent) bool {
			first = append(first, ev)
			if len(first) == 8 {
				apiC.Kill()
			}
			return true
		})
		resp.Body.Close()
		if len(first) < 8 || len(first) > 20 {
			t.Fatalf("read %d events before the replica died", len(first))
		}
		var run string
		var md map[string]any
		_ = json.Unmarshal([]byte(first[0].Data), &md)
		run, _ = md["run_id"].(string)
		q := "?stream_mode=values&stream_mode=updates&stream_mode=custom"
		rest := streamAll(t, "GET", apiB.URL+"/threads/"+th+"/runs/"+run+"/stream"+q, nil, "Last-Event-ID", strconv.Itoa(first[len(first)-1].ID))
		whole := streamAll(t, "GET", apiA.URL+"/threads/"+th+"/runs/"+run+"/stream"+q, nil)
		if got := append(first, rest...); fmt.Sprint(got) != fmt.Sprint(whole) || len(whole) < 42 {
			t.Fatalf("resumed:\n%v\nthe whole stream:\n%v", got, whole)
		}
	})

	t.Run("kill -9 of a worker mid-run: another takes the run over and finishes it once", func(t *testing.T) {
		th := newThread(t, apiA)
		run := apiA.Do("POST", "/threads/"+th+"/runs", map[string]any{"assistant_id": "slow", "input": map[string]any{}}).Map()["run_id"].(string)
		victim := waitRunning(t, apiB, th, run)
		time.Sleep(time.Second)
		workers[victim].Kill()
		killed := time.Now()
		if r := apiB.Do("GET", "/threads/"+th+"/runs/"+run+"/join", nil); r.Status != 200 || !strings.Contains(string(r.Body), `"done":true`) {
			t.Fatalf("join: %d %s", r.Status, r.Body)
		}
		t.Logf("taken over and finished %v after the kill", time.Since(killed).Round(100*time.Millisecond))
		got := runOf(t, apiA, th, run)
		md := got["metadata"].(map[string]any)
		if got["status"] != "success" || md["attempt"] != float64(2) || md["worker"] == victim {
			t.Fatalf("after the takeover: status %v, attempt %v, worker %v (killed %s)", got["status"], md["attempt"], md["worker"], victim)
		}
		evs := streamAll(t, "GET", apiA.URL+"/threads/"+th+"/runs/"+run+"/stream?stream_mode=updates&stream_mode=custom", nil)
		checkRetriedOnce(t, apiB, th, evs)
		workers[victim].Restart()
	})

	t.Run("SIGTERM of a worker mid-run hands the run to another at once", func(t *testing.T) {
		th := newThread(t, apiA)
		run := apiA.Do("POST", "/threads/"+th+"/runs", map[string]any{"assistant_id": "slow", "input": map[string]any{}}).Map()["run_id"].(string)
		leaving := waitRunning(t, apiB, th, run)
		stopped := time.Now()
		workers[leaving].Stop()
		// Taken over without waiting for the lease (3 s) to run out.
		var md map[string]any
		for time.Since(stopped) < 10*time.Second {
			md, _ = runOf(t, apiA, th, run)["metadata"].(map[string]any)
			if md["attempt"] == float64(2) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if md["attempt"] != float64(2) || md["worker"] == leaving {
			t.Fatalf("after the worker stopped: attempt %v on %v", md["attempt"], md["worker"])
		}
		if took := time.Since(stopped); took > 2500*time.Millisecond {
			t.Fatalf("taken over %v after the stop, not at once", took)
		}
		if r := apiB.Do("GET", "/threads/"+th+"/runs/"+run+"/join", nil); r.Status != 200 || !strings.Contains(string(r.Body), `"done":true`) {
			t.Fatalf("join: %d %s", r.Status, r.Body)
		}
		if st := runOf(t, apiA, th, run)["status"]; st != "success" {
			t.Fatalf("the handed-over run ended %v", st)
		}
		workers[leaving].Restart()
	})

	// Nothing outside the prefix: the keys the agents made are under it.
	if n := servertest.RedisKeys(t, redisURL, prefix); n == 0 {
		t.Fatal("no stream keys under the test's prefix")
	}
}
