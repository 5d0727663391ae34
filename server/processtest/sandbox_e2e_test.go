package processtest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"slipway/server/servertest"
)

// The process runtime contains deployment code: an Editor of a workspace
// deploys code whose build command and command graph try to read the
// master key, the database and another deployment's files and
// environment, to use the admin socket and to signal Slipway and another
// agent. Every attempt fails, and the build log and the run's output say
// so. These are the attacks of the finding that started this work.

var (
	probeOnce sync.Once
	probeBin  []byte
	probeErr  error
)

// probeBinary is testdata/sandboxprobe built static, shipped in archives.
func probeBinary(t testing.TB) string {
	t.Helper()
	probeOnce.Do(func() {
		dir, err := os.MkdirTemp("", "probe-")
		if err != nil {
			probeErr = err
			return
		}
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, "probe")
		cmd := osexec.Command("go", "build", "-o", out, "./testdata/sandboxprobe")
		cmd.Dir = servertest.RepoRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			probeErr, probeBin = err, b
			return
		}
		probeBin, probeErr = os.ReadFile(out)
	})
	if probeErr != nil {
		t.Fatalf("build the probe: %v\n%s", probeErr, probeBin)
	}
	return string(probeBin)
}

// requireRoot skips the test outside CI when it cannot run as root, and
// fails it in CI, where the root path is the one that must be proven.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("the sandbox tests run as root in CI")
	}
	t.Skip("skipping: the sandbox tests need root (per-deployment uids, or starting Slipway as another user)")
}

func TestProcessSandboxAsRoot(t *testing.T) {
	requireRoot(t)
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "process"})
	iso := isolation(t, s)
	if os.Getenv("CI") == "true" && iso["mode"] != "per-deployment uid, mount/PID/IPC namespaces" {
		t.Fatalf("CI runs as root with namespaces; isolation: %v", iso)
	}
	// CI's host gives root cgroups: the limits are enforced, and said so.
	if enforced := limitsReported(t, iso); os.Getenv("CI") == "true" && !enforced {
		t.Fatalf("CI runs as root with cgroups, but /info does not list resource limits among the guarantees: %v", iso)
	}
	attackFromDeployment(t, s)
}

// limitsReported checks that /info says whether resource limits hold,
// in one list or the other, and returns whether they do.
func limitsReported(t *testing.T, iso map[string]any) bool {
	t.Helper()
	g, m := fmt.Sprint(iso["guarantees"]), fmt.Sprint(iso["missing"])
	enforced := strings.Contains(g, "resource limits per deployment")
	if !enforced && !strings.Contains(m, "resource limits") {
		t.Fatalf("/info does not say whether resource limits are enforced: %v", iso)
	}
	return enforced
}

// TestProcessSandboxUnderSystemdUmask runs Slipway as the installed unit
// does, with UMask=0077, from a binary only root may execute (what `go
// build` makes under that umask): deployments still start, contained.
func TestProcessSandboxUnderSystemdUmask(t *testing.T) {
	requireRoot(t)
	old := syscall.Umask(0o077) // inherited by the server and what it starts
	t.Cleanup(func() { syscall.Umask(old) })
	binDir := t.TempDir()
	raw, err := os.ReadFile(servertest.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(binDir, "slipway")
	if err := os.WriteFile(bin, raw, 0o700); err != nil {
		t.Fatal(err)
	}
	// The data dir's parents must be traversable by deployments' uids, as
	// /var/lib is; t.TempDir makes them 0700.
	parent := t.TempDir()
	for _, dir := range []string{filepath.Dir(parent), parent} {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(parent, "data")
	s := servertest.StartAs(t, map[string]string{"SLIPWAY_RUNTIME": "process", "SLIPWAY_DATA_DIR": data}, bin, nil)
	isolation(t, s)
	attackFromDeployment(t, s)
}

// TestProcessSandboxUnprivileged runs Slipway as nobody: deployments share
// its uid, and Landlock (and user namespaces where the kernel allows them)
// must contain them all the same.
func TestProcessSandboxUnprivileged(t *testing.T) {
	requireRoot(t)
	const nobody = 65534
	// A copy of the binary that nobody can execute, and a data directory
	// that nobody owns.
	binDir, err := os.MkdirTemp("", "slipway-nobody-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(binDir) })
	raw, err := os.ReadFile(servertest.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(binDir, "slipway")
	if err := os.WriteFile(bin, raw, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.MkdirTemp("", "slipway-nobody-data-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(data) })
	for _, p := range []string{binDir, data} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(data, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	s := servertest.StartAs(t, map[string]string{"SLIPWAY_RUNTIME": "process", "SLIPWAY_DATA_DIR": data},
		bin, &syscall.Credential{Uid: nobody, Gid: nobody})
	iso := isolation(t, s)
	mode, _ := iso["mode"].(string)
	if strings.Contains(mode, "none") {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no Landlock and no user namespaces on the CI kernel: %v", iso)
		}
		t.Skipf("skipping: this kernel offers an unprivileged Slipway nothing to contain deployments with: %v", iso)
	}
	if !strings.Contains(mode, "Landlock") || !strings.Contains(mode, "shared uid") {
		t.Fatalf("isolation of a non-root Slipway: %v", iso)
	}
	missing, _ := json.Marshal(iso["missing"])
	if !strings.Contains(string(missing), "share its uid") {
		t.Fatalf("/info hides that deployments share Slipway's uid: %v", iso)
	}
	limitsReported(t, iso)
	attackFromDeployment(t, s)
}

// isolation is GET /info's runtime.isolation, which must be there.
func isolation(t *testing.T, s *servertest.Server) map[string]any {
	t.Helper()
	rt, _ := s.Do("GET", "/info", nil).Map()["runtime"].(map[string]any)
	iso, _ := rt["isolation"].(map[string]any)
	if rt["driver"] != "process" || iso == nil || iso["mode"] == nil {
		t.Fatalf("/info runtime: %v\n%s", rt, s.Logs())
	}
	t.Logf("isolation: %v", iso)
	return iso
}

func attackFromDeployment(t *testing.T, s *servertest.Server) {
	t.Helper()
	// The victim: a deployment of the Default workspace with a secret.
	const secret = "victim-secret-4f1c9a"
	v := s.Do("POST", "/v2/deployments", map[string]any{"name": "victim", "source": "internal_source", "source_config": map[string]any{},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"},
		"secrets":                []any{map[string]any{"name": "VICTIM_SECRET", "value": secret}}})
	if v.Status != 201 {
		t.Fatalf("create victim: %d %s", v.Status, v.Body)
	}
	victim := v.Map()["id"].(string)
	victimRev := deploySource(t, s, victim, map[string]string{"langgraph.json": `{"graphs": {"agent": {"builtin": "echo"}}}`})
	if st := waitStatus(t, s, victim, victimRev); st != "DEPLOYED" {
		t.Fatalf("victim ended %s:\n%s", st, s.Do("GET", "/v2/deployments/"+victim+"/revisions/"+victimRev+"/logs", nil).Body)
	}
	victimPID := pidWithEnv(t, "VICTIM_SECRET="+secret)

	// The attacker: an Editor of another workspace.
	ws := s.Do("POST", "/api/v1/workspaces", map[string]any{"display_name": "attackers"})
	if ws.Status/100 != 2 {
		t.Fatalf("workspace: %d %s", ws.Status, ws.Body)
	}
	wsID := ws.Map()["id"].(string)
	k := s.Do("POST", "/api/v1/api-key", map[string]any{"description": "attacker", "role_id": "Editor"}, "X-Tenant-Id", wsID)
	if k.Status != 200 {
		t.Fatalf("editor key: %d %s", k.Status, k.Body)
	}
	key := k.Map()["key"].(string)
	as := func(method, path string, body any) *servertest.Response {
		return s.Do(method, path, body, "X-Api-Key", key)
	}

	d := s.DataDir
	victimDir := filepath.Join(d, "deployments", victim)
	probes := []string{
		"own-source=read:langgraph.json", // the control: its own files it reads
		"master-key=read:" + filepath.Join(d, "master.key"),
		"database=read:" + filepath.Join(d, "slipway.db"),
		"initial-key=read:" + filepath.Join(d, "initial-api-key"),
		"data-dir=list:" + d,
		"uploads=list:" + filepath.Join(d, "uploads"),
		"other-agent-data=list:" + filepath.Join(victimDir, "agent-data"),
		"other-source=read:" + filepath.Join(victimDir, "revisions", victimRev, "app", "langgraph.json"),
		"other-environ=environ:" + strconv.Itoa(victimPID),
		"admin-socket=unix:" + filepath.Join(d, "admin", "admin.sock"),
		"admin-token=read:" + filepath.Join(d, "admin", "token"),
		"signal-slipway=signal:" + strconv.Itoa(s.PID()),
		"signal-other-agent=signal:" + strconv.Itoa(victimPID),
		// Agents share the host's loopback: the victim's port is reachable,
		// but its agent answers only Slipway.
		"other-agent-api=http:http://" + envOf(t, victimPID, "SLIPWAY_AGENT_ADDR") + "/info",
	}
	cr := as("POST", "/v2/deployments", map[string]any{"name": "attacker", "source": "internal_source", "secrets": []any{},
		"source_config":          map[string]any{"build_command": "./bin/probe " + strings.Join(probes, " ")},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}})
	if cr.Status != 201 {
		t.Fatalf("create attacker: %d %s", cr.Status, cr.Body)
	}
	attacker := cr.Map()["id"].(string)
	graph, _ := json.Marshal(map[string]any{"graphs": map[string]any{
		"probe": map[string]any{"command": append([]string{"./bin/probe", "graph"}, probes...)}}})
	up := as("POST", "/v2/deployments/"+attacker+"/upload-url", nil)
	if up.Status != 200 {
		t.Fatalf("upload-url: %d %s", up.Status, up.Body)
	}
	if r := servertest.Do(t, "PUT", up.Map()["upload_url"].(string),
		sourceTarball(t, map[string]string{"langgraph.json": string(graph), "bin/probe": probeBinary(t)})); r.Status != 200 {
		t.Fatalf("upload: %d %s", r.Status, r.Body)
	}
	p := as("PATCH", "/v2/deployments/"+attacker, map[string]any{"source_revision_config": map[string]any{
		"source_tarball_path": up.Map()["object_path"], "graph_config_path": "langgraph.json"}})
	if p.Status != 200 {
		t.Fatalf("patch: %d %s", p.Status, p.Body)
	}
	rev := p.Map()["latest_revision_id"].(string)
	var st string
	var logs *servertest.Response
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st, _ = as("GET", "/v2/deployments/"+attacker+"/revisions/"+rev, nil).Map()["status"].(string)
		logs = as("GET", "/v2/deployments/"+attacker+"/revisions/"+rev+"/logs", nil)
		if st == "DEPLOYED" || strings.HasSuffix(st, "FAILED") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the attacker's revision is still %s:\n%s", st, logs.Body)
		}
	}
	if st != "DEPLOYED" {
		t.Fatalf("attacker ended %s:\n%s", st, logs.Body)
	}
	var buildLog bytes.Buffer
	for _, e := range logs.Map()["logs"].([]any) {
		fmt.Fprintln(&buildLog, e.(map[string]any)["message"])
	}
	t.Run("build command", func(t *testing.T) { assertProbes(t, buildLog.String(), probes) })

	// The same probes as a command graph, run through the proxy.
	run := as("POST", "/agents/attacker/runs/wait", map[string]any{"assistant_id": "probe", "input": map[string]any{}})
	if run.Status != 200 {
		t.Fatalf("run: %d %s", run.Status, run.Body)
	}
	out, _ := run.Map()["probes"].(string)
	t.Run("command graph", func(t *testing.T) { assertProbes(t, out, probes) })

	// The victim's agent is unharmed and its secret did not leak.
	if r := s.Do("GET", "/agents/victim/ok", nil); r.Status != 200 {
		t.Fatalf("victim after the attack: %d %s", r.Status, r.Body)
	}
	if strings.Contains(buildLog.String()+out, secret) {
		t.Fatal("the victim's secret is in the attacker's output")
	}
}

// assertProbes checks that every probe ran, the control read its own
// file, and every other attempt was refused.
func assertProbes(t *testing.T, out string, probes []string) {
	t.Helper()
	results := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if label, res, ok := strings.Cut(strings.TrimSpace(line), ": "); ok {
			results[label] = res
		}
	}
	for _, p := range probes {
		label, _, _ := strings.Cut(p, "=")
		res, ok := results[label]
		switch {
		case !ok:
			t.Errorf("probe %s did not report:\n%s", label, out)
		case label == "own-source" && !strings.HasPrefix(res, "ALLOWED"):
			t.Errorf("the deployment cannot read its own source: %s", res)
		case label != "own-source" && !strings.HasPrefix(res, "DENIED"):
			t.Errorf("%s: %s", label, res)
		default:
			t.Logf("%s: %s", label, res)
		}
	}
}

// pidWithEnv finds the process whose environment holds kv (the test is
// root and sees every process).
func pidWithEnv(t *testing.T, kv string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
			if err == nil && bytes.Contains(append([]byte{0}, env...), []byte("\x00"+kv+"\x00")) {
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no process has %s in its environment", strings.SplitN(kv, "=", 2)[0])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// envOf reads one variable of a process's environment (the test is root).
func envOf(t *testing.T, pid int, name string) string {
	t.Helper()
	env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range bytes.Split(env, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok && k == name {
			return v
		}
	}
	t.Fatalf("process %d has no %s", pid, name)
	return ""
}
