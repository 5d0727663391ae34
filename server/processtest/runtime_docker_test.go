package processtest_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"slipway/runtime/docker"
	"slipway/server/servertest"
)

// TestDockerKilledDuringBuildAndDeploy kills Slipway with SIGKILL while the
// docker runtime builds an image, and again while it deploys (an init
// container is still running): after each restart the revision is recorded
// INTERRUPTED, retried to DEPLOYED, and reconciliation leaves no container
// that no record claims.
func TestDockerKilledDuringBuildAndDeploy(t *testing.T) {
	requireRuntime(t, "docker")
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "docker"})
	dep := s.Do("POST", "/v2/deployments", map[string]any{"name": "crashy", "source": "internal_source", "source_config": map[string]any{},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}, "secrets": []any{}}).Map()["id"].(string)

	// A build that takes 3 s: an exec-form RUN needs no shell in the image.
	files := appFiles(t, "")
	files["langgraph.json"] = `{"graphs": {"agent": {"builtin": "echo"}}, "dockerfile_lines": ["RUN [\"/app/bin/counter\", \"--wait\", \"3\"]"]}`
	rev1 := deploySource(t, s, dep, files)
	servertest.WaitRevision(t, s, dep, rev1, "BUILDING")
	time.Sleep(1500 * time.Millisecond)
	s.Kill()
	s.Restart()
	if st := waitStatus(t, s, dep, rev1); st != "DEPLOYED" {
		t.Fatalf("revision 1 after the crash ended %s: %s", st, s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev1+"/logs", nil).Body)
	}
	if logs := string(s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev1+"/logs", nil).Body); !strings.Contains(logs, "interrupted by a restart") {
		t.Fatalf("revision 1's log does not record the interrupted build: %s", logs)
	}

	// A deploy that takes 3 s: an init container (revision 1's image) waits.
	img := "slipway/" + dep + ":" + rev1
	up := s.Do("POST", "/v2/deployments/"+dep+"/upload-url", nil).Map()
	servertest.Do(t, "PUT", up["upload_url"].(string), sourceTarballBytes(appFiles(t, "")))
	rev2 := s.Do("PATCH", "/v2/deployments/"+dep, map[string]any{
		"source_revision_config": map[string]any{"source_tarball_path": up["object_path"]},
		"source_config": map[string]any{"resource_spec": map[string]any{"init_containers": []any{map[string]any{
			"name": "warmup", "image": img, "command": []string{"/app/bin/counter", "--wait", "3"}}}}},
	}).Map()["latest_revision_id"].(string)
	servertest.WaitRevision(t, s, dep, rev2, "DEPLOYING")
	time.Sleep(1500 * time.Millisecond)
	s.Kill()
	s.Restart()
	if st := waitStatus(t, s, dep, rev2); st != "DEPLOYED" {
		t.Fatalf("revision 2 after the crash ended %s: %s", st, s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev2+"/logs", nil).Body)
	}
	if logs := string(s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev2+"/logs", nil).Body); !strings.Contains(logs, "interrupted by a restart") {
		t.Fatalf("revision 2's log does not record the interrupted deploy: %s", logs)
	}
	waitActive(t, s, dep, rev2)
	url := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["url"].(string)
	if r := servertest.Do(t, "GET", url+"/ok", nil, "X-Api-Key", s.Key); r.Status != 200 {
		t.Fatalf("deployment not serving after the crashes: %d %s", r.Status, r.Body)
	}
	// Only revision 2's containers remain: its agent and its init container.
	f := client.Filters{}.Add("label", docker.LabelDeployment+"="+dep)
	deadline := time.Now().Add(10 * time.Second)
	for {
		cs, err := engine(t).ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		var stray []string
		for _, c := range cs.Items {
			if c.Labels[docker.LabelRevision] != rev2 {
				stray = append(stray, fmt.Sprintf("%s (revision %s, %s)", c.Names[0], c.Labels[docker.LabelRevision], c.State))
			}
		}
		if len(stray) == 0 && len(cs.Items) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("containers after reconciliation: %d, stray %v", len(cs.Items), stray)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r := s.Do("DELETE", "/v2/deployments/"+dep, nil); r.Status != 204 {
		t.Fatalf("delete: %d", r.Status)
	}
	for left := leftovers(t, s, "docker", dep); len(left) > 0; left = leftovers(t, s, "docker", dep) {
		if time.Now().After(deadline.Add(20 * time.Second)) {
			t.Fatalf("deleting left: %v", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDockerResourceMapping deploys a revision with a full resource_spec and
// checks, by inspecting what the engine created, that each field landed:
// CPU and memory, labels and annotations, secrets as environment, volumes
// and mounts, an init container that ran to completion, a sidecar in the
// agent's network namespace, and the hardening every container gets.
func TestDockerResourceMapping(t *testing.T) {
	waitParallel(t)
	requireRuntime(t, "docker")
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "docker"})
	dep := s.Do("POST", "/v2/deployments", map[string]any{"name": "mapped", "source": "internal_source", "source_config": map[string]any{},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}, "secrets": []any{}}).Map()["id"].(string)
	rev1 := deploySource(t, s, dep, appFiles(t, ""))
	if st := waitStatus(t, s, dep, rev1); st != "DEPLOYED" {
		t.Fatalf("revision 1 ended %s", st)
	}
	// Revision 1 has no resource_spec: its agent still gets the default
	// memory limit (SLIPWAY_DEFAULT_MEMORY_LIMIT_MB), and the pids limit.
	for _, id := range agentContainers(t, dep, "agent") {
		r, err := engine(t).ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		hc := r.Container.HostConfig
		if hc.Memory != 2048<<20 || hc.PidsLimit == nil || *hc.PidsLimit != 1024 {
			t.Fatalf("an agent created without resource_spec: memory limit %d, pids limit %v; want 2048 MiB and 1024", hc.Memory, hc.PidsLimit)
		}
	}
	img := "slipway/" + dep + ":" + rev1
	spec := map[string]any{
		"cpu": 0.5, "memory_mb": 128,
		"labels": map[string]any{"team": "agents"}, "annotations": map[string]any{"owner": "ops"},
		"volumes": []any{map[string]any{"name": "scratch", "emptyDir": map[string]any{}},
			map[string]any{"name": "state", "persistentVolumeClaim": map[string]any{"claimName": "agent-state"}}},
		"volume_mounts": []any{map[string]any{"name": "scratch", "mountPath": "/scratch"},
			map[string]any{"name": "state", "mountPath": "/state", "readOnly": true}},
		"init_containers": []any{map[string]any{"name": "prepare", "image": img, "command": []string{"/app/bin/counter", "--wait", "0"},
			"env": []any{map[string]any{"name": "STAGE", "value": "init"}}}},
		"sidecars": []any{map[string]any{"name": "helper", "image": img,
			"env": []any{map[string]any{"name": "SLIPWAY_AGENT_ADDR", "value": "127.0.0.1:8001"},
				map[string]any{"name": "SLIPWAY_AGENT_DATA_DIR", "value": "/tmp/side"}},
			"resources": map[string]any{"limits": map[string]any{"cpu": "250m", "memory": "64Mi"}}}},
	}
	p := s.Do("PATCH", "/v2/deployments/"+dep, map[string]any{"source_config": map[string]any{"resource_spec": spec},
		"secrets": []any{map[string]any{"name": "API_TOKEN", "value": "tok-123"}}})
	if p.Status != 200 {
		t.Fatalf("patch: %d %s", p.Status, p.Body)
	}
	rev2 := p.Map()["latest_revision_id"].(string)
	if st := waitStatus(t, s, dep, rev2); st != "DEPLOYED" {
		t.Fatalf("revision 2 ended %s: %s", st, s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev2+"/logs", nil).Body)
	}
	ctx := context.Background()
	inspect := func(role string) []container.InspectResponse {
		var out []container.InspectResponse
		for _, id := range agentContainers(t, dep, role) {
			r, err := engine(t).ContainerInspect(ctx, id, client.ContainerInspectOptions{})
			if cerrdefs.IsNotFound(err) {
				continue // revision 1's, removed meanwhile
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Container.Config.Labels[docker.LabelRevision] == rev2 {
				out = append(out, r.Container)
			}
		}
		if len(out) != 1 {
			t.Fatalf("%d %s containers of revision 2", len(out), role)
		}
		return out
	}
	agent := inspect("agent")[0]
	hc := agent.HostConfig
	checks := []struct {
		what      string
		got, want any
	}{
		{"cpu_limit (2 x cpu) → NanoCPUs", hc.NanoCPUs, int64(1e9)},
		{"cpu → CPU shares", hc.CPUShares, int64(512)},
		{"memory_limit_mb (2 x memory_mb) → memory limit", hc.Memory, int64(256 << 20)},
		{"memory_mb → reservation", hc.MemoryReservation, int64(128 << 20)},
		{"label", agent.Config.Labels["team"], "agents"},
		{"annotation as label", agent.Config.Labels["owner"], "ops"},
		{"deployment label", agent.Config.Labels[docker.LabelDeployment], dep},
		{"secret in env", slices.Contains(agent.Config.Env, "API_TOKEN=tok-123"), true},
		{"unprivileged user", agent.Config.User, "65534:65534"},
	}
	mounts := map[string]string{}
	for _, m := range agent.Mounts {
		mounts[m.Destination] = fmt.Sprintf("%s rw=%v", m.Name, m.RW)
	}
	checks = append(checks,
		struct {
			what      string
			got, want any
		}{"agent database volume", mounts["/data"], "slipway-" + dep + "-data rw=true"},
		struct {
			what      string
			got, want any
		}{"emptyDir mount", mounts["/scratch"], "slipway-" + dep + "-" + rev2 + "-scratch rw=true"},
		struct {
			what      string
			got, want any
		}{"persistentVolumeClaim mount, read-only", mounts["/state"], "slipway-" + dep + "-pvc-agent-state rw=false"})
	init := inspect("init")[0]
	side := inspect("sidecar")[0]
	checks = append(checks, []struct {
		what      string
		got, want any
	}{
		{"init container ran to completion", fmt.Sprint(init.State.Status, " ", init.State.ExitCode), "exited 0"},
		{"init container env", slices.Contains(init.Config.Env, "STAGE=init"), true},
		{"init container command", strings.Join(init.Config.Entrypoint, " "), "/app/bin/counter --wait 0"},
		{"init container without resources: the default memory limit", init.HostConfig.Memory, int64(2048 << 20)},
		{"sidecar shares the agent's network", string(side.HostConfig.NetworkMode), "container:" + agent.ID},
		{"sidecar cpu limit", side.HostConfig.NanoCPUs, int64(250e6)},
		{"sidecar memory limit", side.HostConfig.Memory, int64(64 << 20)},
		{"sidecar running", side.State.Running, true},
	}...)
	for _, c := range checks {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s: got %v, want %v", c.what, c.got, c.want)
		}
	}
	// Every container runs deployment code and gets the same hardening;
	// only the agent of an image Slipway built has a read-only root.
	checkHardened(t, "agent", agent, true)
	checkHardened(t, "init container", init, false)
	checkHardened(t, "sidecar", side, false)
	// The secret value is in the container, never in Slipway's log.
	if strings.Contains(s.Logs(), "tok-123") {
		t.Error("a secret value reached the server log")
	}

	// An agent that crashes is restarted by its restart policy, and the
	// proxy finds it again even if it came back at another address. The
	// crash is a SIGKILL of its process: the engine does not apply a
	// restart policy to a container stopped through its API (docker kill
	// counts as a manual stop), which the health watcher recreates instead
	// (TestRuntimeLostAgent).
	if hc.RestartPolicy.Name != container.RestartPolicyUnlessStopped {
		t.Errorf("the agent's restart policy is %q, want %q", hc.RestartPolicy.Name, container.RestartPolicyUnlessStopped)
	}
	if os.Geteuid() != 0 {
		t.Log("not root: the agent's process (another uid) cannot be killed to check the restart after a crash")
	} else {
		if err := syscall.Kill(agent.State.Pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		url := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["url"].(string)
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if r := servertest.Do(t, "GET", url+"/ok", nil, "X-Api-Key", s.Key); r.Status == 200 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the deployment did not serve again after its agent crashed; the server's log of it:\n%s", servertest.LinesWith(s.Logs(), dep))
			}
		}
	}

	// external_docker: the image as it is, secret_references read from
	// <data dir>/secrets/<secret name>/<key>.
	if err := os.MkdirAll(filepath.Join(s.DataDir, "secrets", "vendor-creds"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.DataDir, "secrets", "vendor-creds", "token"), []byte("ref-456\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ext := s.Do("POST", "/v2/deployments", map[string]any{"name": "external", "source": "external_docker",
		"source_config":          map[string]any{"custom_url": "https://Agent.Example.test"},
		"source_revision_config": map[string]any{"image_uri": img}, "secrets": []any{},
		"secret_references": []any{map[string]any{"name": "VENDOR_TOKEN", "secret_name": "vendor-creds", "secret_key": "token"}}})
	if ext.Status != 201 {
		t.Fatalf("external_docker: %d %s", ext.Status, ext.Body)
	}
	extID, extRev := ext.Map()["id"].(string), ext.Map()["latest_revision_id"].(string)
	if st := waitStatus(t, s, extID, extRev); st != "DEPLOYED" {
		t.Fatalf("external_docker revision ended %s: %s", st, s.Do("GET", "/v2/deployments/"+extID+"/revisions/"+extRev+"/logs", nil).Body)
	}
	ids := agentContainers(t, extID, "agent")
	r, err := engine(t).ContainerInspect(ctx, ids[0], client.ContainerInspectOptions{})
	if err != nil || !slices.Contains(r.Container.Config.Env, "VENDOR_TOKEN=ref-456") {
		t.Fatalf("secret reference not in the environment: %v", err)
	}
	// custom_url: the deployment is also served by host name, with the
	// same credentials as its path.
	byHost := func(key string) int {
		req, _ := http.NewRequest("GET", s.URL+"/assistants/agent", nil)
		req.Host = "agent.example.test:8443"
		if key != "" {
			req.Header.Set("X-Api-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := byHost(s.Key); got != 200 {
		t.Fatalf("by host name: %d", got)
	}
	if got := byHost(""); got != 401 {
		t.Fatalf("by host name without a key: %d", got)
	}
	for _, id := range []string{extID, dep} {
		s.Do("DELETE", "/v2/deployments/"+id, nil)
	}
}

// checkHardened fails the test unless a container the docker runtime
// created is contained as every deployment container must be: no
// capability, no-new-privileges, not privileged, no host namespace, no
// device, no bind mount of a host path, a PID limit, and (readOnly) a read-only
// root filesystem with a tmpfs /tmp.
func checkHardened(t *testing.T, what string, c container.InspectResponse, readOnly bool) {
	t.Helper()
	hc := c.HostConfig
	var pids int64
	if hc.PidsLimit != nil {
		pids = *hc.PidsLimit
	}
	var binds []string
	for _, m := range c.Mounts {
		if m.Type != "volume" && m.Type != "tmpfs" {
			binds = append(binds, fmt.Sprintf("%s %s:%s", m.Type, m.Source, m.Destination))
		}
	}
	checks := []struct {
		what      string
		got, want any
	}{
		{"CapDrop", strings.Join(hc.CapDrop, ","), "ALL"},
		{"CapAdd", len(hc.CapAdd), 0},
		{"SecurityOpt", strings.Join(hc.SecurityOpt, ","), "no-new-privileges"},
		{"Privileged", hc.Privileged, false},
		{"host network", hc.NetworkMode.IsHost(), false},
		{"PID namespace", string(hc.PidMode), ""},
		{"IPC namespace", string(hc.IpcMode), "private"},
		{"UTS namespace", string(hc.UTSMode), ""},
		{"cgroup namespace", string(hc.CgroupnsMode), "private"},
		{"user namespace", string(hc.UsernsMode), ""},
		{"devices", len(hc.Devices), 0},
		{"Binds", len(hc.Binds), 0},
		{"host paths mounted", strings.Join(binds, "; "), ""},
		{"VolumesFrom", len(hc.VolumesFrom), 0},
		{"PidsLimit", pids, int64(1024)},
		{"ReadonlyRootfs", hc.ReadonlyRootfs, readOnly},
		{"tmpfs /tmp", hc.Tmpfs["/tmp"] != "", readOnly},
	}
	for _, c := range checks {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s: %s: got %v, want %v", what, c.what, c.got, c.want)
		}
	}
}
