package docker

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"

	"slipway/runtime"
)

func TestParseQuantities(t *testing.T) {
	cpus := []struct {
		in   string
		want float64
		ok   bool
	}{
		{"500m", 0.5, true}, {"2", 2, true}, {"0.25", 0.25, true}, {" 1 ", 1, true},
		{"", 0, false}, {"-1", 0, false}, {"1k", 0, false}, {"NaN", 0, false}, {"Inf", 0, false}, {"1e9", 0, false},
	}
	for _, c := range cpus {
		got, err := ParseCPU(c.in)
		if (err == nil) != c.ok || c.ok && got != c.want {
			t.Errorf("ParseCPU(%q) = %v, %v; want %v ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
	mems := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"64Mi", 64 << 20, true}, {"1Gi", 1 << 30, true}, {"1G", 1e9, true}, {"512", 512, true}, {"1.5Ki", 1536, true},
		{"", 0, false}, {"-1Mi", 0, false}, {"lots", 0, false}, {"1Pi", 0, false}, {"9e99", 0, false},
	}
	for _, c := range mems {
		got, err := ParseBytes(c.in)
		if (err == nil) != c.ok || c.ok && got != c.want {
			t.Errorf("ParseBytes(%q) = %v, %v; want %v ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestMakePlan(t *testing.T) {
	secrets := t.TempDir()
	if err := os.MkdirAll(filepath.Join(secrets, "creds"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secrets, "creds", "token"), []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := runtime.Spec{DeploymentID: "d", RevisionID: "r", Env: map[string]string{"B": "2", "A": "1"}}
	cases := []struct {
		name   string
		spec   string
		refs   string
		check  func(*testing.T, *plan)
		errHas string
	}{
		{name: "nothing set", check: func(t *testing.T, p *plan) {
			if r := p.resources; r.NanoCPUs != 0 || r.CPUShares != 0 || r.Memory != 0 || r.MemoryReservation != 0 || strings.Join(p.env, ",") != "A=1,B=2" {
				t.Fatalf("plan: %+v", p)
			}
		}},
		{name: "cpu and memory", spec: `{"cpu": 0.5, "cpu_limit": 1.5, "memory_mb": 100, "memory_limit_mb": 300}`, check: func(t *testing.T, p *plan) {
			r := p.resources
			if r.NanoCPUs != 1.5e9 || r.CPUShares != 512 || r.Memory != 300<<20 || r.MemoryReservation != 100<<20 {
				t.Fatalf("resources: %+v", r)
			}
		}},
		{name: "labels win over annotations", spec: `{"labels": {"a": "label"}, "annotations": {"a": "annotation", "b": "x"}}`, check: func(t *testing.T, p *plan) {
			if p.labels["a"] != "label" || p.labels["b"] != "x" {
				t.Fatalf("labels: %v", p.labels)
			}
		}},
		{name: "volumes", spec: `{"volumes": [{"name": "tmp", "emptyDir": {}}, {"name": "bare"}, {"name": "pv", "persistentVolumeClaim": {"claimName": "data"}}],
			"volume_mounts": [{"name": "pv", "mountPath": "/pv", "readOnly": true, "subPath": "x"}]}`, check: func(t *testing.T, p *plan) {
			if len(p.volumes) != 3 || p.volumes[0].name != "slipway-d-r-tmp" || !p.volumes[1].perRevison || p.volumes[2].name != "slipway-d-pvc-data" || p.volumes[2].perRevison {
				t.Fatalf("volumes: %+v", p.volumes)
			}
			m := p.mounts[0]
			if m.Source != "slipway-d-pvc-data" || m.Target != "/pv" || !m.ReadOnly || m.VolumeOptions.Subpath != "x" {
				t.Fatalf("mount: %+v", m)
			}
		}},
		{name: "nfs is unsupported", spec: `{"volumes": [{"name": "n", "nfs": {"server": "x"}}]}`, errHas: "type nfs"},
		{name: "hostPath is refused, not taken for an emptyDir", spec: `{"volumes": [{"name": "h", "hostPath": {"path": "/var/lib/slipway"}}]}`,
			errHas: "type hostPath"},
		{name: "hostPath beside an emptyDir", spec: `{"volumes": [{"name": "h", "emptyDir": {}, "hostPath": {"path": "/"}}]}`, errHas: "type hostPath"},
		{name: "any unknown source is refused", spec: `{"volumes": [{"name": "g", "gitRepo": {"repository": "x"}}]}`, errHas: "type gitRepo"},
		{name: "several sources", spec: `{"volumes": [{"name": "v", "emptyDir": {}, "persistentVolumeClaim": {"claimName": "c"}}]}`,
			errHas: "several sources"},
		{name: "null sources are unset", spec: `{"volumes": [{"name": "v", "nfs": null, "hostPath": null, "emptyDir": {}}]}`, check: func(t *testing.T, p *plan) {
			if len(p.volumes) != 1 || p.volumes[0].name != "slipway-d-r-v" || !p.volumes[0].perRevison {
				t.Fatalf("volumes: %+v", p.volumes)
			}
		}},
		{name: "pvc claim must be a DNS label", spec: `{"volumes": [{"name": "n", "persistentVolumeClaim": {"claimName": "../x"}}]}`, errHas: "DNS label"},
		{name: "secret reference", refs: `[{"name": "TOKEN", "secret_name": "creds", "secret_key": "token"}]`, check: func(t *testing.T, p *plan) {
			if strings.Join(p.env, ",") != "A=1,B=2,TOKEN=abc" {
				t.Fatalf("env: %v", p.env)
			}
		}},
		{name: "missing secret", refs: `[{"name": "T", "secret_name": "creds", "secret_key": "nope"}]`, errHas: "has no key nope"},
		{name: "secret name cannot climb", refs: `[{"name": "T", "secret_name": "..", "secret_key": "passwd"}]`, errHas: "names may hold only"},
		{name: "sidecars and init containers", spec: `{"init_containers": [{"name": "i", "image": "x", "command": ["a"], "args": ["b"],
			"env": [{"name": "E", "value": "1"}, {"name": "S", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}}, {"name": "Z"}]}],
			"sidecars": [{"name": "s", "image": "y", "restartPolicy": "OnFailure", "imagePullPolicy": "Never",
			"resources": {"limits": {"cpu": "250m", "memory": "64Mi"}, "requests": {"cpu": "100m", "memory": "32Mi"}}}]}`,
			check: func(t *testing.T, p *plan) {
				i, s := p.inits[0], p.sidecars[0]
				if strings.Join(i.env, ",") != "E=1,S=abc,Z=" || i.entrypoint[0] != "a" || i.cmd[0] != "b" || i.restart != container.RestartPolicyDisabled {
					t.Fatalf("init: %+v", i)
				}
				if s.restart != container.RestartPolicyOnFailure || s.pullPolicy != "Never" || s.resources.NanoCPUs != 250e6 ||
					s.resources.Memory != 64<<20 || s.resources.CPUShares != 102 || s.resources.MemoryReservation != 32<<20 {
					t.Fatalf("sidecar: %+v", s)
				}
			}},
		{name: "other valueFrom", spec: `{"sidecars": [{"name": "s", "image": "y", "env": [{"name": "P", "valueFrom": {"fieldRef": {}}}]}]}`, errHas: "secretKeyRef"},
		{name: "bad quantity", spec: `{"sidecars": [{"name": "s", "image": "y", "resources": {"limits": {"memory": "lots"}}}]}`, errHas: "not a memory quantity"},
		{name: "mount of an unknown volume", spec: `{"volume_mounts": [{"name": "x", "mountPath": "/x"}]}`, errHas: "names no volume"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := base
			// The spec arrives as the control plane stored it: JSON.
			if c.spec != "" {
				if err := json.Unmarshal([]byte(c.spec), &s.ResourceSpec); err != nil {
					t.Fatal(err)
				}
			}
			if c.refs != "" {
				if err := json.Unmarshal([]byte(c.refs), &s.SecretReferences); err != nil {
					t.Fatal(err)
				}
			}
			p, err := makePlan(s, secrets)
			if c.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), c.errHas) || !errors.Is(err, runtime.ErrUnsupported) {
					t.Fatalf("err = %v, want one containing %q", err, c.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, p)
		})
	}
}

func TestDockerfile(t *testing.T) {
	df, err := dockerfile("slipway-agent:x", graphFile{}, "sub/$HOME.json", "", "", map[string]string{"b": "2", "a": "1"})
	if err != nil || df != "FROM slipway-agent:x\nCOPY app /app\n"+
		"ENV SLIPWAY_AGENT_ADDR=0.0.0.0:8000 SLIPWAY_AGENT_DATA_DIR=/data SLIPWAY_GRAPH_CONFIG=\"/app/sub/\\$HOME.json\"\n"+
		"LABEL \"a\"=\"1\" \"b\"=\"2\"\n" {
		t.Fatalf("default: %v\n%s", err, df)
	}
	if _, err := dockerfile("b", graphFile{}, "langgraph.json", "npm ci", "", nil); err == nil || !strings.Contains(err.Error(), "base_image") {
		t.Fatalf("install command on the shell-less default image: %v", err)
	}
	df, err = dockerfile("b", graphFile{BaseImage: "debian:12", DockerfileLines: []string{"RUN echo hi"}}, "app/langgraph.json", "make deps", "make", nil)
	for _, want := range []string{"FROM b AS slipway\nFROM debian:12\n", "COPY --from=slipway /slipway /slipway", "RUN make deps\n",
		"WORKDIR /app/app\nRUN make\n", "RUN echo hi\n", "USER 65534:65534\nENTRYPOINT [\"/slipway\", \"agent\"]\n"} {
		if err != nil || !strings.Contains(df, want) {
			t.Fatalf("custom base lacks %q: %v\n%s", want, err, df)
		}
	}
}

func FuzzParseQuantity(f *testing.F) {
	for _, s := range []string{"500m", "1Gi", "0.5", "", "1e308Ti", "-0", "NaN"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if v, err := ParseCPU(s); err == nil && (v < 0 || v > 1024) {
			t.Fatalf("ParseCPU(%q) = %v", s, v)
		}
		if v, err := ParseBytes(s); err == nil && (v < 0 || v > 1<<50) {
			t.Fatalf("ParseBytes(%q) = %v", s, v)
		}
	})
}

// FuzzGraphFile: the graph configuration comes from an uploaded archive;
// whatever it holds, the generated Dockerfile keeps one instruction per
// line and the agent's entrypoint last.
func FuzzGraphFile(f *testing.F) {
	f.Add([]byte(`{"base_image": "debian:12", "dockerfile_lines": ["RUN true"]}`))
	f.Add([]byte(`{"base_image": "a\nRUN evil"}`))
	f.Add([]byte(`{"dockerfile_lines": ["ok", "two\nlines"]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		g, err := ParseGraphFile(raw)
		if err != nil {
			return
		}
		df, err := dockerfile("base", g, "langgraph.json", "", "", map[string]string{"k": "v"})
		if err != nil {
			return
		}
		lines := strings.Split(strings.TrimSuffix(df, "\n"), "\n")
		last, want := `LABEL "k"="v"`, 4+len(g.DockerfileLines)
		if g.BaseImage != "" || len(g.DockerfileLines) > 0 {
			last, want = `ENTRYPOINT ["/slipway", "agent"]`, want+3
		}
		if g.BaseImage != "" {
			want += 5
		}
		if lines[len(lines)-1] != last || len(lines) != want {
			t.Fatalf("%d lines (want %d), last %q:\n%s", len(lines), want, lines[len(lines)-1], df)
		}
	})
}
