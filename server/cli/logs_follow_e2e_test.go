package cli_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"slipway/server/servertest"
)

// followedEntry is one line of `slipway logs NAME -f --json`.
type followedEntry struct {
	ID        int64     `json:"id"`
	Timestamp time.Time `json:"timestamp"`
	Message   string    `json:"message"`
	Phase     string    `json:"phase"`
}

func (e followedEntry) key() string {
	return e.Phase + " " + e.Timestamp.Format(time.RFC3339Nano) + " " + e.Message
}

// TestLogsFollowWholeDeployment follows a deployment as a user would,
// with the slipway binary on the process runtime: `logs NAME -f` prints
// the revision's build and deploy, then goes on with the agent's output
// (it used to return at DEPLOYED); the agent's output holds no line of
// Slipway's health checks, which the deployment's health.checks counts
// instead; a rollback prints only what the redeploy writes, not the old
// revision's first build nor its old agent output, and the follow moves
// on to the rolled-back revision without replaying its history.
func TestLogsFollowWholeDeployment(t *testing.T) {
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "process", "SLIPWAY_HEALTH_INTERVAL": "1s"})
	home := t.TempDir()
	u := &user{t: t, bin: servertest.Binary(t), env: []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"SLIPWAY_URL=" + s.URL, "SLIPWAY_API_KEY=" + s.Key,
	}}
	dir := filepath.Join(t.TempDir(), "followed")
	copyDir(t, filepath.Join(servertest.RepoRoot(), "testdata", "cli-agent"), dir)
	deployment := func() map[string]any {
		t.Helper()
		var d map[string]any
		if err := json.Unmarshal([]byte(u.ok("status", "followed", "--json").stdout), &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	u.ok("deploy", dir, "--name", "followed")
	rev1, _ := deployment()["active_revision_id"].(string)
	write(t, filepath.Join(dir, "langgraph.json"), `{"graphs": {"agent": {"builtin": "echo"}, "other": {"builtin": "echo"}}}`)
	u.ok("deploy", dir, "--name", "followed")
	d := deployment()
	depID, _ := d["id"].(string)
	agentURL, _ := d["url"].(string)

	c := u.cmd("logs", "followed", "-f", "--json")
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// Written by the command's copier while the test reads it.
	var stderr servertest.SyncBuffer
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Process.Signal(os.Interrupt)
		_ = c.Wait()
	})
	lines := make(chan followedEntry, 10000)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var e followedEntry
			if err := json.Unmarshal(sc.Bytes(), &e); err == nil {
				lines <- e
			}
		}
	}()
	var seen []followedEntry
	waitLine := func(what string, match func(followedEntry) bool) followedEntry {
		t.Helper()
		deadline := time.After(60 * time.Second)
		for {
			select {
			case e, ok := <-lines:
				if !ok {
					t.Fatalf("logs -f returned before %s (stderr: %s); it printed %d lines", what, stderr.String(), len(seen))
				}
				seen = append(seen, e)
				if match(e) {
					return e
				}
			case <-deadline:
				t.Fatalf("logs -f did not print %s", what)
			}
		}
	}
	waitLine("the deploy's last line", func(e followedEntry) bool {
		return e.Phase == "deploy" && strings.Contains(e.Message, "now serves the deployment")
	})

	// The health watcher checks the agent every second: a few checks,
	// counted in the status, and none of them in the agent's output.
	deadline := time.Now().Add(60 * time.Second)
	for {
		h, _ := s.Do("GET", "/v2/deployments/"+depID, nil).Map()["health"].(map[string]any)
		if n, _ := h["checks"].(float64); n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health.checks did not reach 3: %v", h)
		}
		time.Sleep(200 * time.Millisecond)
	}
	marker := "/threads/" + uuid.NewString()
	if r := servertest.Do(t, "GET", agentURL+marker, nil, "X-Api-Key", s.Key); r.Status != 404 {
		t.Fatalf("GET %s: %d", marker, r.Status)
	}
	waitLine("the agent's line for a request after the deploy", func(e followedEntry) bool {
		return e.Phase == "agent" && strings.Contains(e.Message, marker)
	})
	for _, e := range seen {
		if e.Phase == "agent" && strings.Contains(e.Message, `"/ok"`) {
			t.Fatalf("a health check in the agent's output: %s", e.Message)
		}
	}

	// A rollback to the first revision.
	var before []followedEntry
	for _, l := range strings.Split(strings.TrimSpace(u.ok("logs", "followed", "--revision", rev1, "--json").stdout), "\n") {
		var e followedEntry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("logs --json: %v: %s", err, l)
		}
		before = append(before, e)
	}
	old := map[string]bool{}
	for _, e := range before {
		old[e.key()] = true
	}
	t0 := time.Now()
	r := u.ok("rollback", "followed", rev1)
	var after []followedEntry
	for _, l := range strings.Split(strings.TrimSpace(u.ok("logs", "followed", "--revision", rev1, "--json").stdout), "\n") {
		var e followedEntry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("logs --json: %v: %s", err, l)
		}
		if !old[e.key()] {
			after = append(after, e)
		}
	}
	// The rollback prints at most what the redeploy wrote, of each phase.
	for _, phase := range []string{"build", "deploy", "agent"} {
		printed := strings.Count(r.stdout, "  "+padPhase(phase)+" | ")
		written := 0
		for _, e := range after {
			if e.Phase == phase {
				written++
			}
		}
		if printed > written {
			t.Fatalf("rollback printed %d %s lines, the redeploy wrote %d: the old revision's log was replayed\n%s", printed, phase, written, r.stdout)
		}
	}
	// The follow moves on to the rolled-back revision: its redeploy's
	// lines, none of its history.
	n := len(seen)
	waitLine("the rollback's deploy line", func(e followedEntry) bool {
		return e.Phase == "deploy" && strings.Contains(e.Message, "now serves the deployment") && !e.Timestamp.Before(t0)
	})
	for _, e := range seen[n:] {
		if old[e.key()] {
			t.Fatalf("logs -f replayed the rolled-back revision's earlier line %+v", e)
		}
	}
	if !strings.Contains(stderr.String(), "following revision "+rev1[len(rev1)-8:]) {
		t.Fatalf("logs -f did not say it moved on to %s: %s", rev1, stderr.String())
	}
}

// padPhase is the phase as the progress display pads it.
func padPhase(p string) string { return (p + "      ")[:6] }
