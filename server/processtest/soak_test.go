package processtest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	osexec "os/exec"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"slipway/server/servertest"
)

// TestSoakStreamsThroughSwitches streams runs through a deployment URL
// with the official Python SDK (8 clients, testdata/soak_clients.py) on
// each runtime while the deployment is redeployed, rolled back and its
// agent killed (kill -9; the runtime's healing restarts it), one after
// the other, every 20 s in the long form. Every stream must either
// complete (its last values event holds the echoed message) or end with
// an `error` event the SDK yields; every run that announced its id must
// still be known afterwards. No 502 during a switch, none during a kill
// but for a request the agent had read when it was killed (it may have
// acted on it, so the proxy does not repeat it: at most one per client
// and kill), no other HTTP error, no broken connection, no silently
// truncated stream; nothing is retried here. On
// cb5b11d the requests in the second after a kill were answered 502
// "connect: connection refused", and the streams a kill cut broke off.
//
// The CI form keeps each runtime to about a minute (every operation at
// least once, one every 6 s); -short shortens it to one of each as fast
// as they go. The long form, for BENCHMARKS.md:
//
//	SLIPWAY_SOAK=15m CI=true go test -count=1 -timeout 40m -run TestSoakStreamsThroughSwitches -v ./server/processtest/ | grep soak
func TestSoakStreamsThroughSwitches(t *testing.T) {
	longParallel(t)
	window, every := 45*time.Second, 6*time.Second
	if testing.Short() {
		window, every = 0, 0
	}
	if v := os.Getenv("SLIPWAY_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("SLIPWAY_SOAK=%q: %v", v, err)
		}
		window, every = d, 20*time.Second
	}
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			requireRuntime(t, driver)
			soak(t, driver, window, every)
		})
	}
}

// soakPython is the test virtualenv's interpreter with the official SDK.
func soakPython(t *testing.T) string {
	t.Helper()
	python := os.Getenv("SLIPWAY_TEST_PYTHON")
	if python == "" {
		python = "/opt/slipway-ci/venv/bin/python"
	}
	if err := osexec.Command(python, "-c", "import langgraph_sdk").Run(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the Python SDK is not installed in %s (.ci/run makes it): %v", python, err)
		}
		t.Skipf("skipping: the Python SDK is not installed in %s (or set SLIPWAY_TEST_PYTHON); under CI=true this fails instead", python)
	}
	return python
}

func soak(t *testing.T, driver string, window, every time.Duration) {
	python := soakPython(t)
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": driver})
	marker := fmt.Sprintf("SOAK_MARKER=%d", time.Now().UnixNano())
	mname, mvalue, _ := strings.Cut(marker, "=")
	d := s.Do("POST", "/v2/deployments", map[string]any{"name": "soak", "source": "internal_source", "source_config": map[string]any{},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"},
		"secrets":                []any{map[string]any{"name": mname, "value": mvalue}}})
	if d.Status != 201 {
		t.Fatalf("create: %d %s", d.Status, d.Body)
	}
	dep := d.Map()["id"].(string)
	version := 0
	// Only the echo built-in: the agent is then the one process with the
	// marker in its environment (a command graph would be another).
	files := func() map[string]string {
		version++
		return map[string]string{"langgraph.json": `{"graphs": {"agent": {"builtin": "echo"}}}`, "VERSION": fmt.Sprint(version)}
	}
	deployed := func(rev string) {
		t.Helper()
		if st := waitPyRevision(t, s, dep, rev, 5*time.Minute); st != "DEPLOYED" {
			t.Fatalf("revision %s ended %s:\n%s", rev, st, phaseLogs(s, dep, rev))
		}
	}
	revs := []string{deploySource(t, s, dep, files())}
	deployed(revs[0])
	url := s.URL + "/agents/soak"
	serving := func(why string) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			dm := s.Do("GET", "/v2/deployments/"+dep, nil).Map()
			h, _ := dm["health"].(map[string]any)
			if dm["status"] == "READY" && (h == nil || h["status"] == "healthy") {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("not serving again within 60 s after %s: %v", why, dm)
			}
		}
	}
	serving("the first deploy")

	cmd := osexec.Command(python, "testdata/soak_clients.py", url, s.Key, fmt.Sprint(soakClients))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			stdin.Close()
			_ = cmd.Wait()
		}
	}
	defer stop()

	var redeploys, rollbacks, kills int
	type span struct{ from, to time.Time }
	var killed []span // from the kill until the agent serves again
	type opStart struct {
		name string
		at   time.Time
	}
	var opLog []opStart // every operation's start, to place a failure
	ops := []struct {
		name string
		do   func()
	}{
		{"redeploy", func() {
			rev := deploySource(t, s, dep, files())
			deployed(rev)
			revs = append(revs, rev)
			redeploys++
		}},
		{"kill", func() {
			pid := pidWithEnv(t, marker)
			w := span{from: time.Now()}
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatalf("kill -9 the agent: %v", err)
			}
			kills++
			defer func() { w.to = time.Now(); killed = append(killed, w) }()
			// Serving again: a new agent process, and health says so.
			for deadline := time.Now().Add(60 * time.Second); pidWithEnv(t, marker) == pid; time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the killed agent was not restarted within 60 s")
				}
			}
			time.Sleep(healthSettle)
			serving("a kill")
		}},
		{"rollback", func() {
			to := revs[len(revs)-2]
			if r := s.Do("POST", "/v2/deployments/"+dep+"/revisions/"+to+"/redeploy", nil); r.Status != 200 {
				t.Fatalf("rollback: %d %s", r.Status, r.Body)
			}
			for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
				dm := s.Do("GET", "/v2/deployments/"+dep, nil).Map()
				if dm["active_revision_id"] == to && dm["status"] == "READY" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the rollback to %s did not finish: %v", to, dm)
				}
			}
			revs = append(revs, to)
			rollbacks++
		}},
	}
	start := time.Now()
	time.Sleep(2 * time.Second) // streams under way before the first switch
	for i := 0; i < len(ops) || time.Since(start) < window; i++ {
		began := time.Now()
		op := ops[i%len(ops)]
		opLog = append(opLog, opStart{op.name, began})
		op.do()
		t.Logf("soak %s: %s done in %v", driver, op.name, time.Since(began).Round(time.Millisecond))
		if rest := every - time.Since(began); rest > 0 {
			time.Sleep(rest)
		}
	}
	time.Sleep(time.Second) // streams after the last switch too
	stop()
	elapsed := time.Since(start)

	var rep struct {
		Counts   map[string]int    `json:"counts"`
		Samples  map[string]string `json:"samples"`
		Failures []struct {
			At      float64 `json:"at"`
			Outcome string  `json:"outcome"`
			Detail  string  `json:"detail"`
		} `json:"failures"`
		Seconds float64 `json:"seconds"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("the soak clients' report: %v\nstdout: %s\nstderr: %s", err, out.String(), errOut.String())
	}
	c := rep.Counts
	// The one 502 a proxy cannot avoid: a request the agent had read
	// when kill -9 struck (a plain close, "EOF", before any answer). It
	// may have been acted on, so it is not sent again; each client has at
	// most one request in flight, so a kill makes at most one per client.
	// Any other 502, and any 502 outside a kill (during a redeploy or a
	// rollback), fails the test.
	inKill := func(at float64) bool {
		ts := time.Unix(0, int64(at*1e9))
		for _, w := range killed {
			if !ts.Before(w.from) && !ts.After(w.to) {
				return true
			}
		}
		return false
	}
	readThenKilled := 0
	for _, f := range rep.Failures {
		if f.Outcome == "http_502" && inKill(f.At) && strings.Contains(f.Detail, `did not answer: EOF"`) {
			readThenKilled++
			continue
		}
		// Where it happened: after which operation, how long after.
		ts, last := time.Unix(0, int64(f.At*1e9)), opStart{"the start", start}
		for _, o := range opLog {
			if !o.at.After(ts) {
				last = o
			}
		}
		t.Logf("%s %v after %s began: %s", f.Outcome, ts.Sub(last.at).Round(time.Millisecond), last.name, f.Detail)
	}
	c["http_502"] -= readThenKilled
	t.Logf("soak %s: %d streams in %v (%d completed, %d ended with an error event), %d redeploys, %d rollbacks, %d kills; 502s: %d (+%d read by an agent killed handling them), truncated: %d, lost runs: %d",
		driver, c["streams"], elapsed.Round(time.Second), c["completed"], c["error_event"], redeploys, rollbacks, kills,
		c["http_502"], readThenKilled, c["truncated"], c["lost"])
	if readThenKilled > soakClients*kills {
		t.Errorf("%d requests answered 502 EOF during %d kills, more than one per client per kill", readThenKilled, kills)
	}
	var bad []string
	for k, n := range c {
		switch k {
		case "streams", "completed", "error_event":
			continue
		}
		if n == 0 {
			continue
		}
		bad = append(bad, fmt.Sprintf("%s: %d (e.g. %s)", k, n, rep.Samples[k]))
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("streams that neither completed nor ended with an error event, or runs lost:\n%s", strings.Join(bad, "\n"))
	}
	if c["completed"] < int(elapsed/time.Second) {
		t.Errorf("only %d streams completed in %v: the clients hardly ran\n%s", c["completed"], elapsed, errOut.String())
	}
	if c["error_event"] > 0 {
		t.Logf("error events (e.g.): %s", rep.Samples["error_event"])
	}
}

// soakClients is how many SDK clients stream at once.
const soakClients = 8

// healthSettle lets the health watcher see the restarted agent before the
// next operation, so that operations do not overlap its recovery.
const healthSettle = 500 * time.Millisecond
