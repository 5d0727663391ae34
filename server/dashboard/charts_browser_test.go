package dashboard_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"slipway/server/servertest"
)

// TestDashboardChartsInBrowser: a deployed agent (the counter graph on the
// process runtime) runs a workload of successes and failures; within 30 s
// the deployment page's charts, sampled every second, show exactly those
// runs by outcome, in both windows, with no serious accessibility
// violation. The steps are in e2e/charts.mjs.
func TestDashboardChartsInBrowser(t *testing.T) {
	chromium, node, dir := browserTools(t)
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "process", "SLIPWAY_CHART_INTERVAL": "1s"})
	const pw = "charts-password-1234"
	addOrgAdmin(t, s, "charts@example.com", pw)

	// Deploy the counter graph from a source archive.
	archive, err := os.ReadFile(agentArchive(t))
	if err != nil {
		t.Fatal(err)
	}
	dep := deployArchive(t, s, "charted", archive, 2*time.Minute)

	// The charts' first read of the agent is their baseline: the workload
	// starts once it was made (a point with the agent's gauges).
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := s.Do("GET", "/v2/deployments/"+dep+"/metrics", nil)
		if r.Status != 200 {
			t.Fatalf("metrics: %d %s", r.Status, r.Body)
		}
		read := false
		for _, p := range r.Map()["points"].([]any) {
			read = read || p.(map[string]any)["pending_runs"] != nil
		}
		if read {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the charts never read the agent: %s\n%s", r.Body, tail(s.Logs(), 100))
		}
		time.Sleep(200 * time.Millisecond)
	}
	const successes, failures = 3, 2
	for i := range successes + failures {
		input := map[string]any{"messages": []any{map[string]any{"role": "user", "content": fmt.Sprint("run ", i)}}}
		if i >= successes {
			input = map[string]any{"fail": "a failing run for the charts"}
		}
		r := s.Do("POST", "/agents/charted/runs/wait", map[string]any{"assistant_id": "agent", "input": input})
		// A failing run is still a run: the wait answers its error, not a
		// refusal of the request.
		if i < successes && r.Status != 200 || r.Status >= 400 && r.Status < 500 {
			t.Fatalf("run %d: %d %s", i, r.Status, r.Body)
		}
	}

	shots := os.Getenv("SLIPWAY_SCREENSHOTS")
	if shots == "" {
		shots = filepath.Join(t.TempDir(), "screenshots")
	}
	cmd := exec.Command(node, "charts.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "BASE="+s.URL, "CHROMIUM="+chromium, "SHOTS="+shots, "EMAIL=charts@example.com", "PASSWORD="+pw,
		"DEPLOYMENT="+dep, fmt.Sprintf("SUCCESSES=%d", successes), fmt.Sprintf("FAILURES=%d", failures))
	out, err := cmd.CombinedOutput()
	t.Logf("browser run:\n%s", out)
	if err != nil {
		t.Fatalf("the browser steps failed: %v\nthe end of the server's log:\n%s", err, tail(s.Logs(), 100))
	}
	t.Logf("screenshots in %s", shots)
}
