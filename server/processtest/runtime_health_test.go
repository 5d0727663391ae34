package processtest_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"slipway/server/servertest"
)

// TestRuntimeLostAgent removes the serving agent behind Slipway's back
// (docker rm -f of its container; kill -9 of its process) on each runtime:
// within 10 s the deployment reports UNKNOWN with an unhealthy health
// field, within 30 s it serves again, healthy and READY, with the same
// agent database (a thread created before is still there), and the
// active revision's deploy log tells what happened. Slipway is not
// restarted. The times are logged for BENCHMARKS.md:
//
//	CI=true go test -count=1 -run TestRuntimeLostAgent -v ./server/processtest/ | grep lost-agent
func TestRuntimeLostAgent(t *testing.T) {
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			requireRuntime(t, driver)
			runtimeLostAgent(t, driver)
		})
	}
}

func runtimeLostAgent(t *testing.T, driver string) {
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": driver})
	marker := fmt.Sprintf("LOST_AGENT_MARKER=%d", time.Now().UnixNano())
	name, value, _ := strings.Cut(marker, "=")
	dep := s.Do("POST", "/v2/deployments", map[string]any{"name": "phoenix", "source": "internal_source", "source_config": map[string]any{},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"},
		"secrets":                []any{map[string]any{"name": name, "value": value}}}).Map()["id"].(string)
	rev := deploySource(t, s, dep, appFiles(t, ""))
	if st := waitStatus(t, s, dep, rev); st != "DEPLOYED" {
		t.Fatalf("revision ended %s: %s", st, s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev+"/logs", nil).Body)
	}
	url := s.URL + "/agents/phoenix"
	th := servertest.Do(t, "POST", url+"/threads", map[string]any{}, "X-Api-Key", s.Key)
	if th.Status != 200 {
		t.Fatalf("create a thread: %d %s", th.Status, th.Body)
	}
	thread := th.Map()["thread_id"].(string)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		d := s.Do("GET", "/v2/deployments/"+dep, nil).Map()
		if h, _ := d["health"].(map[string]any); h["status"] == "healthy" && d["status"] == "READY" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deployment is not READY and healthy before the agent is lost: %v", d)
		}
	}

	lost := time.Now()
	switch driver {
	case "docker":
		ids := agentContainers(t, dep, "agent")
		if len(ids) != 1 {
			t.Fatalf("%d agent containers", len(ids))
		}
		if _, err := engine(t).ContainerRemove(context.Background(), ids[0], client.ContainerRemoveOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
	default:
		// The agent runs sandboxed (its own PID namespace and uid when the
		// test is root): found by the secret in its environment.
		pid := pidWithEnv(t, marker)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}

	var detected, recovered time.Duration
	for {
		d := s.Do("GET", "/v2/deployments/"+dep, nil).Map()
		h, _ := d["health"].(map[string]any)
		if detected == 0 && h["status"] == "unhealthy" {
			if d["status"] != "UNKNOWN" {
				t.Errorf("an unhealthy deployment reads status %v, want UNKNOWN", d["status"])
			}
			if r, _ := h["reason"].(string); r == "" || h["since"] == nil {
				t.Errorf("health without reason or since: %v", h)
			}
			detected = time.Since(lost)
		}
		if detected != 0 && h["status"] == "healthy" && d["status"] == "READY" &&
			servertest.Do(t, "GET", url+"/ok", nil, "X-Api-Key", s.Key).Status == 200 {
			recovered = time.Since(lost)
			break
		}
		if detected == 0 && time.Since(lost) > 10*time.Second {
			t.Fatalf("not reported unhealthy within 10 s: %v", d)
		}
		if time.Since(lost) > 30*time.Second {
			t.Fatalf("not serving again within 30 s: %v\n%s", d, s.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("lost-agent %s: unhealthy after %v, serving again after %v", driver, detected.Round(time.Millisecond), recovered.Round(time.Millisecond))
	if r := servertest.Do(t, "GET", url+"/threads/"+thread, nil, "X-Api-Key", s.Key); r.Status != 200 {
		t.Fatalf("the thread is gone after the agent came back: %d %s", r.Status, r.Body)
	}
	logs := string(s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev+"/logs", nil).Body)
	for _, want := range []string{"health check failed", "the agent answers again"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the deploy log does not say %q: %s", want, logs)
		}
	}
}
