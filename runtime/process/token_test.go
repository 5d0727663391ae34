package process

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"slipway/runtime"
	"slipway/server/servertest"
)

// huntScript is a command graph looking for its agent's token: its own
// environment, its parent's (the agent's) environment, memory map and
// file descriptors (what each gives in a second), every environment it can read in /proc, and the
// environment of a subprocess it starts. It answers with all it read,
// base64-encoded.
const huntScript = `cat >/dev/null
{
  echo "== self"; cat /proc/self/environ
  echo; echo "== parent $PPID"; cat /proc/$PPID/environ
  echo; echo "== parent maps"; head -c 200 /proc/$PPID/maps
  echo; echo "== parent fds"; ls -l /proc/$PPID/fd/
  for fd in /proc/$PPID/fd/*; do timeout 1 head -c 200 "$fd" </dev/null; done
  echo; echo "== all"
  for f in /proc/[0-9]*/environ; do cat "$f"; echo; done
  echo "== child"; sh -c env
} >"$TMPDIR/hunt" 2>&1
printf '{"event": "values", "data": {"dump": "%s"}}\n' "$(base64 -w0 <"$TMPDIR/hunt")"
`

// TestAgentTokenIsNotInProc: graph code cannot find the token its agent
// answers to, neither in its own environment, nor in its parent's, nor in
// a subprocess's, nor anywhere else in /proc; no process of the
// deployment has it in its environment. The real agent runs here (its
// reading of the token is what is tested), under the process runtime.
func TestAgentTokenIsNotInProc(t *testing.T) {
	d := newDriver(t)
	d.Bin = servertest.Binary(t)
	if d.uids != nil {
		if err := d.agentBinary(); err != nil {
			t.Fatal(err)
		}
	}
	s := spec(t, "rev1", `{"graphs": {"hunt": {"command": ["sh", "./hunt.sh"]}}}`, map[string]string{"hunt.sh": huntScript})
	s.DeploymentID = "hunted"
	app, err := d.Build(context.Background(), s, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	if _, err := d.Deploy(context.Background(), s, app, &syncWriter{w: &log}); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	ep, _ := d.Endpoint("hunted")
	u, err := url.Parse(ep)
	if err != nil {
		t.Fatal(err)
	}
	token, _ := u.User.Password()
	if len(token) < 16 {
		t.Fatalf("the agent has no token: %q", ep)
	}
	u.User = nil
	body, _ := json.Marshal(map[string]any{"assistant_id": "hunt", "input": map[string]any{}})
	req, _ := http.NewRequest("POST", u.String()+"/runs/wait", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(runtime.AgentTokenHeader, token)
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var out struct {
		Dump string `json:"dump"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(raw, &out) != nil || out.Dump == "" {
		t.Fatalf("run: %d %s", resp.StatusCode, raw)
	}
	dump, err := base64.StdEncoding.DecodeString(out.Dump)
	if err != nil {
		t.Fatal(err)
	}
	// The hunt ran: its subprocess printed an environment.
	if !strings.Contains(string(dump), "== child") || !strings.Contains(string(dump), "PATH=") {
		t.Fatalf("the graph's search did not run through:\n%s", dump)
	}
	if bytes.Contains(dump, []byte(token)) {
		t.Fatalf("graph code found its agent's token:\n%s", dump)
	}
	// Neither does any process of the deployment hold it in its
	// environment (the test is root and reads them all).
	for _, pid := range deploymentPIDs(t, d, "hunted") {
		env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
		if err == nil && bytes.Contains(env, []byte(token)) {
			t.Fatalf("process %d of the deployment has the token in its environment", pid)
		}
	}
}

// deploymentPIDs are the processes of the deployment: those of its cgroup,
// or, without cgroups, every process of its uid.
func deploymentPIDs(t *testing.T, d *Driver, dep string) []int {
	t.Helper()
	var pids []int
	if dirs := d.cgroups.Dirs(dep); len(dirs) > 0 {
		raw, err := os.ReadFile(filepath.Join(dirs[0], "cgroup.procs"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range strings.Fields(string(raw)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}
