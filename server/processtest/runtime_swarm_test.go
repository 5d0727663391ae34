package processtest_test

import (
	"context"
	"fmt"
	"io"
	"net"
	neturl "net/url"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	swarmtypes "github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"slipway/runtime/docker"
	"slipway/runtime/swarm"
	"slipway/server/servertest"
)

// requireSwarm needs the local engine to be a manager of an active swarm
// (.ci/run makes it one) and a registry (Debian's docker-registry, started
// for the test); it returns the registry's address. At the test's end the
// swarm objects of the installs it started go, then their docker objects.
func requireSwarm(t *testing.T) string {
	t.Helper()
	e := engine(t)
	if err := swarm.CheckSwarm(context.Background(), e); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the swarm runtime tests need a one-node swarm (docker swarm init --advertise-addr 127.0.0.1): %v", err)
		}
		t.Skipf("skipping: %v; under CI=true this fails instead", err)
	}
	reg := startRegistry(t)
	t.Cleanup(func() {
		for _, s := range servertest.Started(t) {
			if s.InstanceID == "" {
				continue
			}
			d := &swarm.Driver{Client: e, Docker: &docker.Driver{Client: e, Root: t.TempDir(), Instance: s.InstanceID}}
			if err := d.Reconcile(context.Background(), map[string]string{}); err != nil {
				t.Logf("clean up swarm objects of install %s: %v", s.InstanceID, err)
			}
		}
		cleanupInstalls(t, e)
	})
	return reg
}

var (
	envGraphOnce sync.Once
	envGraphBin  []byte
	envGraphErr  error
)

// envGraph is a static command graph that answers with the values of the
// environment variables its input names: how a test sees what reached the
// agent's environment from inside.
func envGraph(t *testing.T) string {
	t.Helper()
	envGraphOnce.Do(func() {
		dir, err := os.MkdirTemp("", "envgraph-")
		if err != nil {
			envGraphErr = err
			return
		}
		defer os.RemoveAll(dir)
		src := `package main

import (
	"encoding/json"
	"fmt"
	"os"
)

func main() {
	var req struct {
		Input struct{ Names []string } ` + "`json:\"input\"`" + `
	}
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		os.Exit(1)
	}
	env := map[string]any{}
	for _, n := range req.Input.Names {
		v, ok := os.LookupEnv(n)
		if !ok {
			v = "<unset>"
		}
		env[n] = v
	}
	b, _ := json.Marshal(map[string]any{"event": "updates", "node": "env", "data": map[string]any{"env": env}})
	fmt.Println(string(b))
}
`
		for name, body := range map[string]string{"go.mod": "module envgraph\n\ngo 1.22\n", "main.go": src} {
			if envGraphErr = os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); envGraphErr != nil {
				return
			}
		}
		cmd := osexec.Command("go", "build", "-o", "envgraph", ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			envGraphErr = fmt.Errorf("%v: %s", err, out)
			return
		}
		envGraphBin, envGraphErr = os.ReadFile(filepath.Join(dir, "envgraph"))
	})
	if envGraphErr != nil {
		t.Fatalf("build the env graph: %v", envGraphErr)
	}
	return string(envGraphBin)
}

// swarmApp is appFiles with the env graph.
func swarmApp(t *testing.T) map[string]string {
	files := appFiles(t, `, "env": {"command": ["./bin/envgraph"]}`)
	files["bin/envgraph"] = envGraph(t)
	return files
}

// swarmService inspects the deployment's service.
func swarmService(t *testing.T, dep string) swarmtypes.Service {
	t.Helper()
	res, err := engine(t).ServiceInspect(context.Background(), "slipway-"+dep, client.ServiceInspectOptions{})
	if err != nil {
		t.Fatalf("inspect the service of %s: %v", dep, err)
	}
	return res.Service
}

// swarmLeftovers lists the swarm objects (services, secrets) and docker
// objects that carry the deployment's label.
func swarmLeftovers(t *testing.T, s *servertest.Server, dep string) []string {
	t.Helper()
	out := leftovers(t, s, "docker", dep)
	f := client.Filters{}.Add("label", docker.LabelDeployment+"="+dep)
	svcs, err := engine(t).ServiceList(context.Background(), client.ServiceListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, sv := range svcs.Items {
		out = append(out, "service "+sv.Spec.Name)
	}
	secs, err := engine(t).SecretList(context.Background(), client.SecretListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range secs.Items {
		out = append(out, "secret "+sc.Spec.Name)
	}
	return out
}

func revLogs(s *servertest.Server, dep, rev string) string {
	return string(s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev+"/logs", nil).Body)
}

// TestSwarmDeployServeDelete deploys a source on the swarm runtime: the
// image goes through the registry and the service names it by digest;
// the deployment serves the echo built-in and a command graph through its
// URL, with the revision's secret in the agent's environment (from a Swarm
// secret); the service carries the limits, reservations and hardening;
// delete leaves nothing with the deployment's label.
func TestSwarmDeployServeDelete(t *testing.T) {
	waitParallel(t)
	reg := requireSwarm(t)
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "swarm", "SLIPWAY_REGISTRY": reg})
	d := s.Do("POST", "/v2/deployments", map[string]any{"name": "swarmed", "source": "internal_source",
		"source_config":          map[string]any{"resource_spec": map[string]any{"cpu": 0.5, "memory_mb": 96, "cpu_limit": 1.5, "memory_limit_mb": 192}},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"},
		"secrets":                []any{map[string]any{"name": "API_TOKEN", "value": "tok-swarm"}}})
	if d.Status != 201 {
		t.Fatalf("create: %d %s", d.Status, d.Body)
	}
	dep := d.Map()["id"].(string)
	rev1 := deploySource(t, s, dep, swarmApp(t))
	if st := waitStatus(t, s, dep, rev1); st != "DEPLOYED" {
		t.Fatalf("revision 1 ended %s:\n%s\n%s", st, revLogs(s, dep, rev1), s.Logs())
	}
	url := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["url"].(string)
	agent := func(method, path string, body any) *servertest.Response {
		return servertest.Do(t, method, url+path, body, "X-Api-Key", s.Key)
	}
	if r := agent("GET", "/ok", nil); r.Status != 200 {
		t.Fatalf("GET /ok through the deployment URL: %d %s", r.Status, r.Body)
	}
	th := agent("POST", "/threads", map[string]any{}).Map()["thread_id"].(string)
	cw := agent("POST", "/threads/"+th+"/runs/wait", map[string]any{"assistant_id": "counter",
		"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "four"}}}})
	if cw.Status != 200 || !strings.Contains(string(cw.Body), "4 characters") {
		t.Fatalf("command graph: %d %s", cw.Status, cw.Body)
	}
	ew := agent("POST", "/threads/"+th+"/runs/wait", map[string]any{"assistant_id": "env",
		"input": map[string]any{"names": []string{"API_TOKEN", "SLIPWAY_AGENT_TOKEN"}}})
	if ew.Status != 200 {
		t.Fatalf("env graph: %d %s", ew.Status, ew.Body)
	}
	env, _ := ew.Map()["env"].(map[string]any)
	if env["API_TOKEN"] != "tok-swarm" || env["SLIPWAY_AGENT_TOKEN"] != "<unset>" {
		t.Fatalf("the agent's environment as its graphs see it: %v (want the secret, and no agent token)", env)
	}

	ctx0 := context.Background()
	svc := swarmService(t, dep)
	cs := svc.Spec.TaskTemplate.ContainerSpec
	res := svc.Spec.TaskTemplate.Resources
	var tmpfs string
	for _, m := range cs.Mounts {
		if m.Target == "/tmp" && m.TmpfsOptions != nil {
			tmpfs = fmt.Sprintf("%s size=%d mode=%o", m.Type, m.TmpfsOptions.SizeBytes, uint32(m.TmpfsOptions.Mode))
		}
	}
	secretEnv := map[string]bool{}
	for _, r := range cs.Secrets {
		secretEnv[r.File.Name] = true
	}
	checks := []struct {
		what      string
		got, want any
	}{
		{"image by digest from the registry", strings.HasPrefix(cs.Image, reg+"/slipway/"+dep+"@sha256:"), true},
		{"cpu → reservation", res.Reservations.NanoCPUs, int64(5e8)},
		{"memory_mb → reservation", res.Reservations.MemoryBytes, int64(96 << 20)},
		{"cpu_limit → limit", res.Limits.NanoCPUs, int64(15e8)},
		{"memory_limit_mb → limit", res.Limits.MemoryBytes, int64(192 << 20)},
		{"pids limit", res.Limits.Pids, int64(1024)},
		{"read-only root filesystem", cs.ReadOnly, true},
		{"capabilities dropped", strings.Join(cs.CapabilityDrop, ","), "ALL"},
		{"tmpfs /tmp", tmpfs, "tmpfs size=268435456 mode=1777"},
		{"secret as a Swarm secret, not env", secretEnv["env.API_TOKEN"] && !strings.Contains(strings.Join(cs.Env, " "), "tok-swarm"), true},
		{"health check", cs.Healthcheck != nil && strings.Join(cs.Healthcheck.Test, " ") == "CMD /slipway swarm-task probe", true},
		{"start-first update with rollback", fmt.Sprint(svc.Spec.UpdateConfig.Order, " ", svc.Spec.UpdateConfig.FailureAction), "stop-first rollback"}, // the agent database is on the data volume
		{"install label", svc.Spec.Labels[docker.LabelInstance], s.InstanceID},
		{"one replica", *svc.Spec.Mode.Replicated.Replicas, uint64(1)},
	}
	// Services carry no-new-privileges from API 1.46 (Docker 27) on; older
	// engines drop it (the README says so).
	if api := engine(t).ClientVersion(); apiAtLeast(api, 46) {
		checks = append(checks, struct {
			what      string
			got, want any
		}{"no-new-privileges", cs.Privileges != nil && cs.Privileges.NoNewPrivileges, true})
	} else {
		t.Logf("engine API %s: services cannot say no-new-privileges; not checked", api)
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.what, c.got, c.want)
		}
	}
	n, err := engine(t).NetworkInspect(ctx0, "slipway-"+dep, client.NetworkInspectOptions{})
	if err != nil || n.Network.Driver != "overlay" || !n.Network.Attachable {
		t.Errorf("the deployment's network: %v driver %q attachable %v; want an attachable overlay", err, n.Network.Driver, n.Network.Attachable)
	}

	// Healing: the task's container is killed outside Slipway; Swarm starts
	// another task, on another published port, and Slipway follows it.
	ctx := context.Background()
	cs0, err := engine(t).ContainerList(ctx, client.ContainerListOptions{Filters: client.Filters{}.
		Add("label", "com.docker.swarm.service.name=slipway-"+dep)})
	if err != nil || len(cs0.Items) != 1 {
		t.Fatalf("the service's containers: %v %d", err, len(cs0.Items))
	}
	if _, err := engine(t).ContainerKill(ctx, cs0.Items[0].ID, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for {
		r := agent("GET", "/ok", nil)
		if r.Status == 200 && time.Since(killed) > time.Second {
			break
		}
		if time.Since(killed) > 60*time.Second {
			t.Fatalf("the deployment did not serve again after its task was killed: %d %s", r.Status, r.Body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("serving again %v after the task's container was killed", time.Since(killed).Round(100*time.Millisecond))
	if r := agent("GET", "/threads/"+th, nil); r.Status != 200 {
		t.Fatalf("the thread after the task was replaced: %d %s", r.Status, r.Body)
	}

	if r := s.Do("DELETE", "/v2/deployments/"+dep, nil); r.Status != 204 {
		t.Fatalf("delete: %d", r.Status)
	}
	deadline := time.Now().Add(60 * time.Second)
	for left := swarmLeftovers(t, s, dep); len(left) > 0; left = swarmLeftovers(t, s, dep) {
		if time.Now().After(deadline) {
			t.Fatalf("deleting left: %v", left)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := engine(t).ServiceInspect(context.Background(), "slipway-"+dep, client.ServiceInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Fatalf("the service after delete: %v", err)
	}
}

// apiAtLeast says whether Docker API version api (1.N) is 1.minor or later.
func apiAtLeast(api string, minor int) bool {
	var major, n int
	if _, err := fmt.Sscanf(api, "%d.%d", &major, &n); err != nil {
		return false
	}
	return major > 1 || major == 1 && n >= minor
}

// swarmEnvOf runs the env graph through the deployment URL and returns the
// variables it saw.
func swarmEnvOf(t *testing.T, s *servertest.Server, url string, names ...string) map[string]any {
	t.Helper()
	th := servertest.Do(t, "POST", url+"/threads", map[string]any{}, "X-Api-Key", s.Key).Map()["thread_id"].(string)
	r := servertest.Do(t, "POST", url+"/threads/"+th+"/runs/wait", map[string]any{"assistant_id": "env",
		"input": map[string]any{"names": names}}, "X-Api-Key", s.Key)
	if r.Status != 200 {
		t.Fatalf("env graph: %d %s", r.Status, r.Body)
	}
	env, _ := r.Map()["env"].(map[string]any)
	return env
}

// TestSwarmRolloutRollbackSecrets redeploys on the swarm runtime: a new
// revision (a new secret value) rolls out start-first and serves, with
// the thread the first one stored (the data volume stays); a revision
// whose agent cannot start is rolled back by Swarm, the revision ends
// DEPLOY_FAILED with a log that says so and the previous revision keeps
// serving. Then secret_references: an external_docker deployment reads an
// existing Swarm secret, and one naming a missing secret fails clearly.
func TestSwarmRolloutRollbackSecrets(t *testing.T) {
	waitParallel(t)
	reg := requireSwarm(t)
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "swarm", "SLIPWAY_REGISTRY": reg})
	d := s.Do("POST", "/v2/deployments", map[string]any{"name": "rolled", "source": "internal_source", "source_config": map[string]any{},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"},
		"secrets":                []any{map[string]any{"name": "API_TOKEN", "value": "one"}}})
	if d.Status != 201 {
		t.Fatalf("create: %d %s", d.Status, d.Body)
	}
	dep := d.Map()["id"].(string)
	rev1 := deploySource(t, s, dep, swarmApp(t))
	if st := waitStatus(t, s, dep, rev1); st != "DEPLOYED" {
		t.Fatalf("revision 1 ended %s:\n%s", st, revLogs(s, dep, rev1))
	}
	url := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["url"].(string)
	th := servertest.Do(t, "POST", url+"/threads", map[string]any{}, "X-Api-Key", s.Key).Map()["thread_id"].(string)

	// Revision 2: another secret value. Requests keep coming meanwhile:
	// during the stop-first handover they wait at Slipway's gate.
	done, counted := make(chan struct{}), make(chan struct{})
	requests, failed := 0, 0
	go func() {
		defer close(counted)
		for {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			requests++
			if r := servertest.Do(t, "GET", url+"/ok", nil, "X-Api-Key", s.Key); r.Status != 200 {
				failed++
			}
		}
	}()
	p := s.Do("PATCH", "/v2/deployments/"+dep, map[string]any{"secrets": []any{map[string]any{"name": "API_TOKEN", "value": "two"}}})
	if p.Status != 200 {
		t.Fatalf("patch: %d %s", p.Status, p.Body)
	}
	rev2 := p.Map()["latest_revision_id"].(string)
	st := waitStatus(t, s, dep, rev2)
	close(done)
	<-counted
	if st != "DEPLOYED" {
		t.Fatalf("revision 2 ended %s:\n%s", st, revLogs(s, dep, rev2))
	}
	t.Logf("during the stop-first rollout %d of %d requests through the deployment URL failed", failed, requests)
	waitActive(t, s, dep, rev2)
	if logs := revLogs(s, dep, rev2); !strings.Contains(logs, "stop-first") {
		t.Fatalf("revision 2's log does not tell the rollout: %s", logs)
	}
	if env := swarmEnvOf(t, s, url, "API_TOKEN"); env["API_TOKEN"] != "two" {
		t.Fatalf("after revision 2 the agent sees API_TOKEN=%v, want two", env["API_TOKEN"])
	}
	if r := servertest.Do(t, "GET", url+"/threads/"+th, nil, "X-Api-Key", s.Key); r.Status != 200 {
		t.Fatalf("the thread revision 1 stored, after revision 2: %d %s", r.Status, r.Body)
	}
	if got := swarmService(t, dep).Spec.Labels[docker.LabelRevision]; got != rev2 {
		t.Fatalf("the service runs revision %s, want %s", got, rev2)
	}

	// Revision 3 cannot start (an unknown built-in graph): Swarm rolls back.
	bad := swarmApp(t)
	bad["langgraph.json"] = `{"graphs": {"agent": {"builtin": "no-such-builtin"}}}`
	rev3 := deploySource(t, s, dep, bad)
	if st := waitStatus(t, s, dep, rev3); st != "DEPLOY_FAILED" {
		t.Fatalf("revision 3 ended %s, want DEPLOY_FAILED:\n%s", st, revLogs(s, dep, rev3))
	}
	if logs := revLogs(s, dep, rev3); !strings.Contains(logs, "Swarm rolled the service back to revision "+rev2) {
		t.Fatalf("revision 3's log does not tell the rollback: %s", logs)
	}
	if got := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["active_revision_id"]; got != rev2 {
		t.Fatalf("active revision after the failed one: %v, want %s", got, rev2)
	}
	if got := swarmService(t, dep).Spec.Labels[docker.LabelRevision]; got != rev2 {
		t.Fatalf("after the rollback the service runs revision %s, want %s", got, rev2)
	}
	if env := swarmEnvOf(t, s, url, "API_TOKEN"); env["API_TOKEN"] != "two" {
		t.Fatalf("after the rollback the agent sees API_TOKEN=%v, want two", env["API_TOKEN"])
	}

	// secret_references name existing Swarm secrets: <secret_name>.<secret_key>.
	ctx := context.Background()
	ref := "swarmtest-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))[:10] + fmt.Sprint(time.Now().UnixNano()%1e6)
	sec, err := engine(t).SecretCreate(ctx, client.SecretCreateOptions{Spec: swarmtypes.SecretSpec{
		Annotations: swarmtypes.Annotations{Name: ref + ".password"}, Data: []byte("from-swarm")}})
	if err != nil {
		t.Fatal(err)
	}
	image := swarmService(t, dep).Spec.TaskTemplate.ContainerSpec.Image
	ext := func(name, secretName string) (string, string) {
		r := s.Do("POST", "/v2/deployments", map[string]any{"name": name, "source": "external_docker", "source_config": map[string]any{},
			"source_revision_config": map[string]any{"image_uri": image}, "secrets": []any{},
			"secret_references": []any{map[string]any{"name": "DB_PASSWORD", "secret_name": secretName, "secret_key": "password"}}})
		if r.Status != 201 {
			t.Fatalf("create %s: %d %s", name, r.Status, r.Body)
		}
		m := r.Map()
		return m["id"].(string), m["latest_revision_id"].(string)
	}
	refDep, refRev := ext("referencing", ref)
	t.Cleanup(func() {
		// A failed test leaves the service that uses it: that goes first
		// (the install's cleanup runs after this one).
		_, _ = engine(t).ServiceRemove(context.Background(), "slipway-"+refDep, client.ServiceRemoveOptions{})
		for i := 0; i < 150; i++ {
			if _, err := engine(t).SecretRemove(context.Background(), sec.ID, client.SecretRemoveOptions{}); err == nil || cerrdefs.IsNotFound(err) {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
	if st := waitStatus(t, s, refDep, refRev); st != "DEPLOYED" {
		t.Fatalf("the deployment with a secret reference ended %s:\n%s", st, revLogs(s, refDep, refRev))
	}
	refURL := s.Do("GET", "/v2/deployments/"+refDep, nil).Map()["url"].(string)
	if env := swarmEnvOf(t, s, refURL, "DB_PASSWORD"); env["DB_PASSWORD"] != "from-swarm" {
		t.Fatalf("the referenced secret in the agent's environment: %v, want from-swarm", env["DB_PASSWORD"])
	}
	missDep, missRev := ext("missing-ref", ref+"-missing")
	if st := waitStatus(t, s, missDep, missRev); st != "DEPLOY_FAILED" {
		t.Fatalf("a reference to a missing secret ended %s, want DEPLOY_FAILED", st)
	}
	if logs := revLogs(s, missDep, missRev); !strings.Contains(logs, "the swarm has no secret "+ref+"-missing.password") {
		t.Fatalf("the failed reference's log does not name the missing secret: %s", logs)
	}
	for _, dd := range []string{dep, refDep, missDep} {
		if r := s.Do("DELETE", "/v2/deployments/"+dd, nil); r.Status != 204 {
			t.Fatalf("delete: %d", r.Status)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, dd := range []string{dep, refDep, missDep} {
		for left := swarmLeftovers(t, s, dd); len(left) > 0; left = swarmLeftovers(t, s, dd) {
			if time.Now().After(deadline) {
				t.Fatalf("deleting %s left: %v", dd, left)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if _, err := engine(t).SecretInspect(ctx, sec.ID, client.SecretInspectOptions{}); err != nil {
		t.Fatalf("the referenced secret is not Slipway's and must stay: %v", err)
	}
}

// TestSwarmRestartReconcileSecondInstall: a second install on the same
// swarm leaves the first one's service alone; after the first one's
// restart its service, rolled back outside Slipway meanwhile, is brought
// back to the revision Slipway's record names, and serves.
func TestSwarmRestartReconcileSecondInstall(t *testing.T) {
	waitParallel(t)
	reg := requireSwarm(t)
	env := map[string]string{"SLIPWAY_RUNTIME": "swarm", "SLIPWAY_REGISTRY": reg}
	s := servertest.Start(t, env)
	d := s.Do("POST", "/v2/deployments", map[string]any{"name": "restarted", "source": "internal_source", "source_config": map[string]any{},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"},
		"secrets":                []any{map[string]any{"name": "API_TOKEN", "value": "one"}}})
	dep := d.Map()["id"].(string)
	rev1 := deploySource(t, s, dep, swarmApp(t))
	if st := waitStatus(t, s, dep, rev1); st != "DEPLOYED" {
		t.Fatalf("revision 1 ended %s:\n%s", st, revLogs(s, dep, rev1))
	}
	rev2 := s.Do("PATCH", "/v2/deployments/"+dep, map[string]any{"secrets": []any{map[string]any{"name": "API_TOKEN", "value": "two"}}}).Map()["latest_revision_id"].(string)
	if st := waitStatus(t, s, dep, rev2); st != "DEPLOYED" {
		t.Fatalf("revision 2 ended %s:\n%s", st, revLogs(s, dep, rev2))
	}
	waitActive(t, s, dep, rev2)
	before := swarmService(t, dep).Version.Index

	// A second install reconciles at its start: it has no record of the
	// deployment, and the service carries another install's id.
	other := servertest.Start(t, env)
	if other.InstanceID == s.InstanceID {
		t.Fatal("the two installs share an instance id")
	}
	if got := swarmService(t, dep); got.Version.Index != before {
		t.Fatalf("the second install touched the first one's service (version %d → %d)", before, got.Version.Index)
	}

	// While Slipway is down, the service is rolled back outside it.
	s.Kill()
	ctx := context.Background()
	cur := swarmService(t, dep)
	if _, err := engine(t).ServiceUpdate(ctx, cur.ID, client.ServiceUpdateOptions{Version: cur.Version, Spec: cur.Spec, Rollback: "previous"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for swarmService(t, dep).Spec.Labels[docker.LabelRevision] != rev1 {
		if time.Now().After(deadline) {
			t.Fatal("the out-of-band rollback did not take")
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.Restart()
	url := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["url"].(string)
	for {
		got := swarmService(t, dep)
		if got.Spec.Labels[docker.LabelRevision] == rev2 && got.UpdateStatus != nil && got.UpdateStatus.State == swarmtypes.UpdateStateCompleted {
			if r := servertest.Do(t, "GET", url+"/ok", nil, "X-Api-Key", s.Key); r.Status == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the restart the service runs revision %s (want %s):\n%s", got.Spec.Labels[docker.LabelRevision], rev2, s.Logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if env := swarmEnvOf(t, s, url, "API_TOKEN"); env["API_TOKEN"] != "two" {
		t.Fatalf("after the reconciliation the agent sees API_TOKEN=%v, want two", env["API_TOKEN"])
	}
}

// gatewayForward listens on the swarm's docker_gwbridge gateway (the
// host, as the tasks' containers reach it) and forwards each connection to
// target: the test PostgreSQL server listens on loopback only.
func gatewayForward(t *testing.T, target string) string {
	t.Helper()
	n, err := engine(t).NetworkInspect(context.Background(), "docker_gwbridge", client.NetworkInspectOptions{})
	if err != nil || len(n.Network.IPAM.Config) == 0 || !n.Network.IPAM.Config[0].Gateway.IsValid() {
		t.Fatalf("the swarm's docker_gwbridge network: %v", err)
	}
	return forwardOn(t, n.Network.IPAM.Config[0].Gateway.String(), target)
}

// forwardOn listens on host and forwards each connection to target.
// Either side's end ends both: a killed agent's connections must close on
// the server too, or they count against its role's connection limit.
func forwardOn(t *testing.T, host, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { io.Copy(u, c); u.Close(); c.Close() }()
				io.Copy(c, u)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestSwarmStartFirstOnPostgres: with the agent's state in PostgreSQL
// (SLIPWAY_POSTGRES_URL), a new revision rolls out start-first: the new
// task runs beside the old one until it is healthy, and the thread stored
// through revision 1 is there after it.
func TestSwarmStartFirstOnPostgres(t *testing.T) {
	waitParallel(t)
	reg := requireSwarm(t)
	admin := servertest.PostgresAdminURL(t)
	u, err := neturl.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = gatewayForward(t, u.Host)
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "swarm", "SLIPWAY_REGISTRY": reg, "SLIPWAY_POSTGRES_URL": u.String()})
	d := s.Do("POST", "/v2/deployments", map[string]any{"name": "pg-swarm", "source": "internal_source", "source_config": map[string]any{},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"},
		"secrets":                []any{map[string]any{"name": "API_TOKEN", "value": "one"}}})
	dep := d.Map()["id"].(string)
	t.Cleanup(func() { servertest.DropAgentDatabase(t, admin, "slipway_dep_"+strings.ReplaceAll(dep, "-", "")) })
	rev1 := deploySource(t, s, dep, swarmApp(t))
	if st := waitStatus(t, s, dep, rev1); st != "DEPLOYED" {
		t.Fatalf("revision 1 ended %s:\n%s\n%s", st, revLogs(s, dep, rev1), s.Logs())
	}
	url := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["url"].(string)
	th := servertest.Do(t, "POST", url+"/threads", map[string]any{}, "X-Api-Key", s.Key).Map()["thread_id"].(string)

	// Count the service's running containers while revision 2 rolls out.
	ctx := context.Background()
	most, requests, failed := 0, 0, 0
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			cs, err := engine(t).ContainerList(ctx, client.ContainerListOptions{Filters: client.Filters{}.
				Add("label", "com.docker.swarm.service.name=slipway-"+dep)})
			if err == nil {
				most = max(most, len(cs.Items))
			}
			requests++
			if r := servertest.Do(t, "GET", url+"/ok", nil, "X-Api-Key", s.Key); r.Status != 200 {
				failed++
			}
		}
	}()
	rev2 := s.Do("PATCH", "/v2/deployments/"+dep, map[string]any{"secrets": []any{map[string]any{"name": "API_TOKEN", "value": "two"}}}).Map()["latest_revision_id"].(string)
	st := waitStatus(t, s, dep, rev2)
	close(done)
	<-watched
	if st != "DEPLOYED" {
		t.Fatalf("revision 2 ended %s:\n%s", st, revLogs(s, dep, rev2))
	}
	if logs := revLogs(s, dep, rev2); !strings.Contains(logs, "start-first") {
		t.Fatalf("revision 2's log does not tell a start-first rollout: %s", logs)
	}
	t.Logf("during the rollout %d of %d requests through the deployment URL failed", failed, requests)
	if most < 2 {
		t.Fatalf("at most %d containers of the service ran at once during the rollout; start-first runs both", most)
	}
	if r := servertest.Do(t, "GET", url+"/threads/"+th, nil, "X-Api-Key", s.Key); r.Status != 200 {
		t.Fatalf("the thread revision 1 stored in PostgreSQL, after revision 2: %d %s", r.Status, r.Body)
	}
	if env := swarmEnvOf(t, s, url, "API_TOKEN"); env["API_TOKEN"] != "two" {
		t.Fatalf("after revision 2 the agent sees API_TOKEN=%v, want two", env["API_TOKEN"])
	}
	if r := s.Do("DELETE", "/v2/deployments/"+dep, nil); r.Status != 204 {
		t.Fatalf("delete: %d", r.Status)
	}
}
