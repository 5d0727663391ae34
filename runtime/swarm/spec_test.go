package swarm

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/swarm"

	"slipway/runtime"
	"slipway/runtime/docker"
)

func ptr[T any](v T) *T { return &v }

func testDriver() *Driver {
	return &Driver{Docker: &docker.Driver{Instance: "inst-1"}}
}

// TestServiceSpec maps a revision onto a service: resources as
// reservations and limits, the docker runtime's hardening where a service
// can say it, labels with the install's id, the health check and the
// rollout settings.
func TestServiceSpec(t *testing.T) {
	d := testDriver()
	s := runtime.Spec{DeploymentID: "dep", DeploymentName: "name", RevisionID: "rev", Source: "internal_source",
		ResourceSpec: &runtime.ResourceSpec{CPU: ptr(0.5), MemoryMB: ptr(128), CPULimit: ptr(1.0), MemoryLimitMB: ptr(256),
			Labels: map[string]string{"team": "agents", docker.LabelInstance: "spoofed"}},
		AgentEnv: map[string]string{"SLIPWAY_AGENT_WORKERS": "4"}}
	p, err := docker.PlanAgent(s, "", 2048)
	if err != nil {
		t.Fatal(err)
	}
	spec := d.serviceSpec(s, p, taskSpec{image: "reg/x@sha256:abc", slipwayImage: true, token: "tok",
		healthTimeout: 30 * time.Second, stopGrace: 10 * time.Second, monitor: 5 * time.Second,
		secrets: []*swarm.SecretReference{{SecretName: "s"}}})
	cs := spec.TaskTemplate.ContainerSpec
	res := spec.TaskTemplate.Resources
	var tmp *mount.Mount
	for i, m := range cs.Mounts {
		if m.Target == "/tmp" {
			tmp = &cs.Mounts[i]
		}
	}
	cases := []struct {
		what      string
		got, want any
	}{
		{"name", spec.Name, "slipway-dep"},
		{"cpu reservation", res.Reservations.NanoCPUs, int64(5e8)},
		{"memory reservation", res.Reservations.MemoryBytes, int64(128 << 20)},
		{"cpu limit", res.Limits.NanoCPUs, int64(1e9)},
		{"memory limit", res.Limits.MemoryBytes, int64(256 << 20)},
		{"pids limit", res.Limits.Pids, int64(1024)},
		{"read-only", cs.ReadOnly, true},
		{"no-new-privileges", cs.Privileges.NoNewPrivileges, true},
		{"caps", strings.Join(cs.CapabilityDrop, ","), "ALL"},
		{"tmpfs", tmp != nil && tmp.Type == mount.TypeTmpfs && tmp.TmpfsOptions.SizeBytes == 256<<20 && tmp.TmpfsOptions.Mode == 0o1777, true},
		{"data volume", cs.Mounts[0].Source + " " + cs.Mounts[0].Target + " " + cs.Mounts[0].VolumeOptions.Labels[docker.LabelInstance], "slipway-dep-data /data inst-1"},
		{"user label", cs.Labels["team"], "agents"},
		{"our labels win", cs.Labels[docker.LabelInstance], "inst-1"},
		{"service labels", spec.Labels[docker.LabelRevision] + " " + spec.Labels[docker.LabelInstance], "rev inst-1"},
		{"agent env", slices.Contains(cs.Env, "SLIPWAY_AGENT_WORKERS=4") && slices.Contains(cs.Env, "SLIPWAY_AGENT_TOKEN=tok"), true},
		{"entry", strings.Join(cs.Command, " "), "/slipway swarm-task run"},
		{"health check", strings.Join(cs.Healthcheck.Test, " "), "CMD /slipway swarm-task probe"},
		{"start period", cs.Healthcheck.StartPeriod, 30 * time.Second},
		{"secrets", len(cs.Secrets), 1},
		{"replicas", *spec.Mode.Replicated.Replicas, uint64(1)},
		{"update", spec.UpdateConfig.FailureAction, swarm.UpdateFailureActionRollback},
		{"monitor", spec.UpdateConfig.Monitor, 5 * time.Second},
		{"bbolt agent: stop-first", spec.UpdateConfig.Order, swarm.UpdateOrderStopFirst},
		{"network", spec.TaskTemplate.Networks[0].Target, "slipway-dep"},
		{"published in host mode", spec.EndpointSpec.Ports[0].PublishMode, swarm.PortConfigPublishModeHost},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.what, c.got, c.want)
		}
	}

	// An image given by reference keeps its own entrypoint and a writable
	// root; an agent on PostgreSQL rolls out start-first.
	s.Source = "external_docker"
	s.AgentEnv["SLIPWAY_AGENT_POSTGRES_URL"] = "postgres://x"
	spec = d.serviceSpec(s, p, taskSpec{image: "img"})
	cs = spec.TaskTemplate.ContainerSpec
	if cs.ReadOnly || cs.Command != nil || cs.Healthcheck != nil || spec.UpdateConfig.Order != swarm.UpdateOrderStartFirst {
		t.Fatalf("external image: read-only %v, command %v, health check %v, order %s", cs.ReadOnly, cs.Command, cs.Healthcheck, spec.UpdateConfig.Order)
	}
}

func TestCheckPlanRefusesSidecars(t *testing.T) {
	s := runtime.Spec{DeploymentID: "dep", RevisionID: "rev", ResourceSpec: &runtime.ResourceSpec{
		Sidecars: []runtime.Container{{Name: "helper", Image: "img"}}}}
	p, err := docker.PlanAgent(s, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPlan(p); err == nil || !strings.Contains(err.Error(), "helper") {
		t.Fatalf("a sidecar on swarm: %v", err)
	}
}

func TestSecretNames(t *testing.T) {
	dep, rev := "01a216c4-d119-7c60-bfc7-b6c6461094a3", "01a216c4-ff8d-7b4a-97c5-5cb3b98dfde7"
	a, b := ownSecretName(dep, rev, "API_TOKEN"), ownSecretName(dep, rev, "OTHER")
	if len(a) > 64 || a == b || a != ownSecretName(dep, rev, "API_TOKEN") {
		t.Fatalf("own secret names %q %q: at most 64 characters, distinct, stable", a, b)
	}
	if got := referencedSecretName(runtime.SecretReference{Name: "E", SecretName: "db", SecretKey: "password"}); got != "db.password" {
		t.Fatalf("referenced secret name %q", got)
	}
}

// TestSecretEnv: the task entry adds the secret files to the environment;
// a secret replaces an image variable of its name, and never one of
// Slipway's own settings.
func TestSecretEnv(t *testing.T) {
	dir := t.TempDir()
	for name, v := range map[string]string{"env.API_TOKEN": "tok\n", "ref.DB_PASSWORD": "pw\n", "env.SLIPWAY_AGENT_DATA_DIR": "/elsewhere", "env.PATH": "/evil", "other": "x"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o400); err != nil {
			t.Fatal(err)
		}
	}
	got, err := secretEnv(dir, []string{"PATH=/bin", "SLIPWAY_AGENT_DATA_DIR=/data"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"API_TOKEN=tok\n", "DB_PASSWORD=pw", "PATH=/evil", "SLIPWAY_AGENT_DATA_DIR=/data"}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("environment %q, want %q", got, want)
	}
	if got, err := secretEnv(filepath.Join(dir, "none"), []string{"A=1"}); err != nil || !slices.Equal(got, []string{"A=1"}) {
		t.Fatalf("without secrets: %q %v", got, err)
	}
}

func TestEncodeAuth(t *testing.T) {
	if got, err := EncodeAuth("r:5000", "", ""); got != "" || err != nil {
		t.Fatalf("no credentials: %q %v", got, err)
	}
	got, err := EncodeAuth("r:5000", "u", "p")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.URLEncoding.DecodeString(got)
	if err != nil {
		t.Fatal(err)
	}
	var a struct{ Username, Password, ServerAddress string }
	if err := json.Unmarshal(raw, &a); err != nil || a.Username != "u" || a.Password != "p" || a.ServerAddress != "r:5000" {
		t.Fatalf("decoded %s: %+v %v", raw, a, err)
	}
}
