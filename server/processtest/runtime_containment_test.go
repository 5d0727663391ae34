package processtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"slipway/runtime/docker"
	"slipway/server/servertest"
)

// TestDockerContainment deploys testdata/graphs/containment on the docker
// runtime, beside a second deployment, and runs it over HTTP through the
// deployment's URL, as its agent's command graph, as an init container and
// as a sidecar. From each place it tries to read Slipway's master key and
// data dir at their host paths, reach the admin socket and the Docker
// socket, reach Slipway's API on loopback and through the bridge gateway,
// reach the other deployment's agent, see the other deployment's processes
// or their environment, signal or ptrace Slipway, use a capability (chown
// to root, mknod, raw socket, mount, setuid 0) and write to its root
// filesystem. Every attempt must fail, and the probe's controls (its own
// agent, its /tmp) must work. It also inspects what the engine created and
// the revision image, and checks that a volume that would mount something
// of the host, or another deployment's image, is refused.
func TestDockerContainment(t *testing.T) {
	waitParallel(t)
	requireRuntime(t, "docker")
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "docker"})
	ctx := context.Background()

	// What the server says of the isolation in force, as the engine
	// reports it.
	iso := s.Do("GET", "/info", nil).Map()["runtime"].(map[string]any)["isolation"].(map[string]any)
	if mode, _ := iso["mode"].(string); !strings.HasPrefix(mode, "containers:") {
		t.Fatalf("isolation at GET /info: %v", iso)
	}
	info, err := engine(t).Info(ctx, client.InfoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	userns := strings.Contains(strings.Join(info.Info.SecurityOptions, " "), "name=userns")
	if said := strings.Contains(fmt.Sprint(iso["missing"]), "user namespace remapping is off"); said == userns {
		t.Errorf("the engine's security options are %v, but the isolation's missing list is %v", info.Info.SecurityOptions, iso["missing"])
	}
	if !strings.Contains(fmt.Sprint(iso["guarantees"]), "listens on loopback") {
		t.Errorf("the API listens on loopback, but the guarantees do not say so: %v", iso["guarantees"])
	}

	// The other deployment, in another workspace: an echo agent with a
	// secret of its own.
	ws := s.Do("POST", "/api/v1/workspaces", map[string]any{"display_name": "neighbours"})
	if ws.Status != 200 && ws.Status != 201 {
		t.Fatalf("create a workspace: %d %s", ws.Status, ws.Body)
	}
	inWS := func(method, path string, body any) *servertest.Response {
		return s.Do(method, path, body, "X-Tenant-Id", ws.Map()["id"].(string))
	}
	otherSecret := "other-secret-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	other := inWS("POST", "/v2/deployments", map[string]any{"name": "neighbour", "source": "internal_source", "source_config": map[string]any{},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"},
		"secrets":                []any{map[string]any{"name": "NEIGHBOUR_TOKEN", "value": otherSecret}}}).Map()["id"].(string)
	up := inWS("POST", "/v2/deployments/"+other+"/upload-url", nil).Map()
	servertest.Do(t, "PUT", up["upload_url"].(string), sourceTarball(t, map[string]string{"langgraph.json": `{"graphs": {"agent": {"builtin": "echo"}}}`}))
	otherRev := inWS("PATCH", "/v2/deployments/"+other, map[string]any{"source_revision_config": map[string]any{
		"source_tarball_path": up["object_path"]}}).Map()["latest_revision_id"].(string)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st := inWS("GET", "/v2/deployments/"+other+"/revisions/"+otherRev, nil).Map()["status"]
		if st == "DEPLOYED" {
			break
		}
		if strings.HasSuffix(fmt.Sprint(st), "FAILED") || time.Now().After(deadline) {
			t.Fatalf("the other deployment's revision: %v", st)
		}
	}
	otherAgent := agentAddr(t, other)

	// The probe's deployment, with a secret that must not reach its image.
	probeSecret := "probe-secret-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	dep := s.Do("POST", "/v2/deployments", map[string]any{"name": "prober", "source": "internal_source", "source_config": map[string]any{},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"},
		"secrets":                []any{map[string]any{"name": "PROBE_TOKEN", "value": probeSecret}}}).Map()["id"].(string)
	targets := map[string]any{
		"master_key": filepath.Join(s.DataDir, "master.key"), "admin_socket": filepath.Join(s.DataDir, "admin", "admin.sock"),
		"data_dir": s.DataDir, "api_port": apiPort(t, s), "slipway_pid": slipwayPID(t, s),
		"other_agent": otherAgent, "other_secret": otherSecret,
	}
	for _, p := range []string{targets["master_key"].(string), targets["admin_socket"].(string)} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("the probe would look for %s, which is not there on the host either: %v", p, err)
		}
	}
	// The probe runs first as a RUN step of the revision's image build
	// (exec form: the agent image has no shell), and prints its report
	// into the build log.
	initArg, _ := json.Marshal(targets)
	runStep, _ := json.Marshal([]string{"/app/bin/containment", "--report", string(initArg)})
	graphCfg, _ := json.Marshal(map[string]any{"graphs": map[string]any{"probe": map[string]any{"command": []string{"./bin/containment"}}},
		"dockerfile_lines": []string{"RUN " + string(runStep)}})
	files := map[string]string{"langgraph.json": string(graphCfg), "bin/containment": staticGraph(t, "containment")}
	rev1 := deploySource(t, s, dep, files)
	if st := waitStatus(t, s, dep, rev1); st != "DEPLOYED" {
		t.Fatalf("the probe's revision ended %s: %s", st, s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev1+"/logs", nil).Body)
	}
	// A build step sees only the uploaded source: not the data dir, not
	// the sockets, not the API on loopback, not another deployment. It
	// runs with the builder's default capabilities (see Isolation), so
	// those attempts are only logged.
	checkProbe(t, "image build", buildReport(t, s, dep, rev1), []string{"read_master_key", "list_data_dir", "admin_socket",
		"docker_socket", "api_loopback", "api_gateway", "other_agent", "processes", "signal_slipway", "ptrace_slipway"}, []string{"control_tmp"})

	// Revision 2 runs the probe as an init container and as a sidecar too
	// (revision 1's image holds it).
	img := "slipway/" + dep + ":" + rev1
	asSidecar := map[string]any{}
	for k, v := range targets {
		asSidecar[k] = v
	}
	asSidecar["own_agent"] = "127.0.0.1:8000" // the sidecar shares the agent's network namespace
	sideArg, _ := json.Marshal(asSidecar)
	p := s.Do("PATCH", "/v2/deployments/"+dep, map[string]any{"source_config": map[string]any{"resource_spec": map[string]any{
		"init_containers": []any{map[string]any{"name": "probe-init", "image": img,
			"command": []string{"/app/bin/containment", "--report", string(initArg)}}},
		"sidecars": []any{map[string]any{"name": "probe-side", "image": img, "restartPolicy": "OnFailure",
			"command": []string{"/app/bin/containment", "--report", string(sideArg)}}},
	}}})
	if p.Status != 200 {
		t.Fatalf("patch: %d %s", p.Status, p.Body)
	}
	rev2 := p.Map()["latest_revision_id"].(string)
	if st := waitStatus(t, s, dep, rev2); st != "DEPLOYED" {
		t.Fatalf("revision 2 ended %s: %s", st, s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev2+"/logs", nil).Body)
	}
	waitActive(t, s, dep, rev2)

	// The agent's command graph, over HTTP through the deployment's URL.
	url := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["url"].(string)
	asGraph := map[string]any{}
	for k, v := range targets {
		asGraph[k] = v
	}
	asGraph["own_agent"] = "127.0.0.1:8000"
	th := servertest.Do(t, "POST", url+"/threads", map[string]any{}, "X-Api-Key", s.Key).Map()["thread_id"].(string)
	run := servertest.Do(t, "POST", url+"/threads/"+th+"/runs/wait", map[string]any{"assistant_id": "probe", "input": asGraph}, "X-Api-Key", s.Key)
	if run.Status != 200 {
		t.Fatalf("the probe's run: %d %s", run.Status, run.Body)
	}
	var graph map[string]string
	if raw, err := json.Marshal(run.Map()["probe"]); err != nil || json.Unmarshal(raw, &graph) != nil || len(graph) == 0 {
		t.Fatalf("the probe's run returned no results: %s", run.Body)
	}
	attempts := []string{"read_master_key", "list_data_dir", "admin_socket", "docker_socket", "api_loopback", "api_gateway",
		"other_agent", "processes", "signal_slipway", "ptrace_slipway", "capabilities", "chown_to_root", "mknod", "raw_socket",
		"setuid_root", "mount", "write_root_fs"}
	checkProbe(t, "command graph", graph, attempts, []string{"control_own_agent", "control_tmp"})
	// The agent's root filesystem is read only; /tmp is its tmpfs.
	if !strings.Contains(graph["write_root_fs"], "read-only file system") {
		t.Errorf("command graph: writing to the root filesystem: %s", graph["write_root_fs"])
	}
	if graph["uid"] != "65534" {
		t.Errorf("command graph: runs as uid %s, want 65534", graph["uid"])
	}

	// The init container's and the sidecar's reports, from their output.
	checkProbe(t, "init container", containerReport(t, dep, rev2, "init"), attempts, []string{"control_tmp"})
	checkProbe(t, "sidecar", containerReport(t, dep, rev2, "sidecar"), attempts, []string{"control_own_agent", "control_tmp"})

	// What the engine created for revision 2.
	for _, role := range []string{"agent", "init", "sidecar"} {
		for _, id := range agentContainers(t, dep, role) {
			r, err := engine(t).ContainerInspect(ctx, id, client.ContainerInspectOptions{})
			if err != nil || r.Container.Config.Labels[docker.LabelRevision] != rev2 {
				continue
			}
			checkHardened(t, role, r.Container, role == "agent")
		}
	}

	// The secret reaches the container as environment, never the image:
	// neither its configuration nor any layer's history holds it.
	for _, ref := range []string{img, "slipway/" + dep + ":" + rev2} {
		if ii, err := engine(t).ImageInspect(ctx, ref); err == nil {
			if cfg := ii.Config; cfg != nil && strings.Contains(strings.Join(cfg.Env, " "), probeSecret) {
				t.Errorf("image %s has the secret in its environment", ref)
			}
		}
		h, err := engine(t).ImageHistory(ctx, ref)
		if err != nil {
			continue // revision 2 reuses revision 1's image when nothing changed
		}
		for _, l := range h.Items {
			if strings.Contains(l.CreatedBy, probeSecret) {
				t.Errorf("image %s: a layer holds the secret: %s", ref, l.CreatedBy)
			}
		}
	}

	// Volumes: hostPath is not in the API's shape (422); a type that would
	// mount something from outside fails the deploy, naming the type.
	if r := s.Do("PATCH", "/v2/deployments/"+dep, map[string]any{"source_config": map[string]any{"resource_spec": map[string]any{
		"volumes": []any{map[string]any{"name": "host", "hostPath": map[string]any{"path": s.DataDir}}}}}}); r.Status != 422 {
		t.Errorf("a hostPath volume: %d %s", r.Status, r.Body)
	}
	nfs := s.Do("PATCH", "/v2/deployments/"+dep, map[string]any{"source_config": map[string]any{"resource_spec": map[string]any{
		"volumes":       []any{map[string]any{"name": "share", "nfs": map[string]any{"server": "127.0.0.1", "path": "/"}}},
		"volume_mounts": []any{map[string]any{"name": "share", "mountPath": "/share"}}}}})
	if nfs.Status != 200 {
		t.Fatalf("patch with an nfs volume: %d %s", nfs.Status, nfs.Body)
	}
	rev3 := nfs.Map()["latest_revision_id"].(string)
	if st := waitStatus(t, s, dep, rev3); st != "DEPLOY_FAILED" {
		t.Fatalf("an nfs volume: revision ended %s", st)
	}
	if logs := string(s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev3+"/logs", nil).Body); !strings.Contains(logs, "has type nfs") {
		t.Errorf("the failed revision's log does not name the volume type: %s", logs)
	}
	// Another workspace's revision image holds its deployment's source:
	// naming it as an init container's image fails the deploy.
	stolen := s.Do("PATCH", "/v2/deployments/"+dep, map[string]any{"source_config": map[string]any{"resource_spec": map[string]any{
		"init_containers": []any{map[string]any{"name": "steal", "image": "slipway/" + other + ":" + otherRev,
			"command": []string{"/slipway", "version"}}}}}})
	if stolen.Status != 200 {
		t.Fatalf("patch with another deployment's image: %d %s", stolen.Status, stolen.Body)
	}
	rev4 := stolen.Map()["latest_revision_id"].(string)
	if st := waitStatus(t, s, dep, rev4); st != "DEPLOY_FAILED" {
		t.Fatalf("another deployment's image: revision ended %s", st)
	}
	if logs := string(s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev4+"/logs", nil).Body); !strings.Contains(logs, "built for a deployment of another workspace") {
		t.Errorf("the failed revision's log does not say why: %s", logs)
	}
	if a := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["active_revision_id"]; a != rev2 {
		t.Errorf("after the refused revisions the active revision is %v, want %s", a, rev2)
	}

	if r := s.Do("DELETE", "/v2/deployments/"+dep, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if r := inWS("DELETE", "/v2/deployments/"+other, nil); r.Status != 204 {
		t.Fatalf("delete the other deployment: %d %s", r.Status, r.Body)
	}
	for _, id := range []string{dep, other} {
		deadline := time.Now().Add(60 * time.Second)
		for left := leftovers(t, s, "docker", id); len(left) > 0; left = leftovers(t, s, "docker", id) {
			if time.Now().After(deadline) {
				t.Fatalf("deleting the deployment left: %v", left)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// checkProbe fails the test unless every attempt was made and blocked and
// every control worked.
func checkProbe(t *testing.T, where string, got map[string]string, attempts, controls []string) {
	t.Helper()
	for _, a := range attempts {
		if r, ok := got[a]; !ok || !strings.HasPrefix(r, "blocked: ") {
			t.Errorf("%s: %s: %q", where, a, r)
		}
	}
	for _, c := range controls {
		if r := got[c]; !strings.HasPrefix(r, "ok: ") {
			t.Errorf("%s: control %s did not work, so the probe proves nothing: %q", where, c, r)
		}
	}
	keys := make([]string, 0, len(got))
	for k := range got {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("%s: %s: %s", where, k, got[k])
	}
}

// containerReport is what `containment --report` printed in the revision's
// container of role (an init container or a sidecar), once it has exited.
func containerReport(t *testing.T, dep, rev, role string) map[string]string {
	t.Helper()
	ctx := context.Background()
	for _, id := range agentContainers(t, dep, role) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			r, err := engine(t).ContainerInspect(ctx, id, client.ContainerInspectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if r.Container.Config.Labels[docker.LabelRevision] != rev {
				break
			}
			if r.Container.State != nil && !r.Container.State.Running && r.Container.State.Status == "exited" {
				rc, err := engine(t).ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true})
				if err != nil {
					t.Fatal(err)
				}
				var out, errs bytes.Buffer
				_, _ = stdcopy.StdCopy(&out, &errs, rc)
				rc.Close()
				var m map[string]string
				if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &m); err != nil {
					t.Fatalf("%s container's report: %v: %s", role, err, out.String())
				}
				return m
			}
			if time.Now().After(deadline) {
				t.Fatalf("the %s container did not finish its report", role)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	t.Fatalf("no %s container of revision %s", role, rev)
	return nil
}

// buildReport is what `containment --report` printed as a RUN step of the
// revision's image build, from the revision's log.
func buildReport(t *testing.T, s *servertest.Server, dep, rev string) map[string]string {
	t.Helper()
	var logs struct {
		Logs []struct {
			Message string `json:"message"`
		} `json:"logs"`
	}
	body := s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev+"/logs", nil).Body
	if err := json.Unmarshal(body, &logs); err != nil {
		t.Fatalf("revision logs: %v: %s", err, body)
	}
	for _, l := range logs.Logs {
		m := strings.TrimSpace(l.Message)
		if !strings.HasPrefix(m, "{") || !strings.Contains(m, `"read_master_key"`) {
			continue
		}
		var r map[string]string
		if err := json.Unmarshal([]byte(m), &r); err != nil {
			t.Fatalf("the build step's report: %v: %s", err, m)
		}
		return r
	}
	t.Fatalf("no report of the build step in the revision's log: %s", body)
	return nil
}

// agentAddr is the address of a deployment's serving agent on its network.
func agentAddr(t *testing.T, dep string) string {
	t.Helper()
	for _, id := range agentContainers(t, dep, "agent") {
		r, err := engine(t).ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
		if err != nil || r.Container.State == nil || !r.Container.State.Running {
			continue
		}
		if n := r.Container.NetworkSettings.Networks["slipway-"+dep]; n != nil && n.IPAddress.IsValid() {
			return net.JoinHostPort(n.IPAddress.String(), "8000")
		}
	}
	t.Fatalf("deployment %s has no running agent", dep)
	return ""
}

func apiPort(t *testing.T, s *servertest.Server) int {
	t.Helper()
	_, port, err := net.SplitHostPort(s.Env["SLIPWAY_ADDR"])
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(port)
	return n
}

// slipwayPID finds the server's pid on the host by its data dir.
func slipwayPID(t *testing.T, s *servertest.Server) int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if bytes.Contains(env, []byte("SLIPWAY_DATA_DIR="+s.DataDir+"\x00")) && bytes.HasSuffix(cmd, []byte("serve\x00")) {
			return pid
		}
	}
	t.Fatal("the server's process is not in /proc")
	return 0
}

var (
	graphMu   sync.Mutex
	graphBins = map[string][]byte{}
)

// staticGraph is testdata/graphs/<name> built static, to ship inside a
// source archive (the agent image has no libc).
func staticGraph(t *testing.T, name string) string {
	t.Helper()
	graphMu.Lock()
	defer graphMu.Unlock()
	if b, ok := graphBins[name]; ok {
		return string(b)
	}
	out := filepath.Join(t.TempDir(), name)
	cmd := osexec.Command("go", "build", "-o", out, "./testdata/graphs/"+name)
	cmd.Dir = servertest.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", name, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	graphBins[name] = b
	return string(b)
}
