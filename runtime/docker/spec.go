package docker

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"

	"slipway/runtime"
)

// Labels on everything the driver creates. Reconciliation finds its own
// objects by them, so they are the driver's only memory across restarts.
const (
	LabelManaged    = "dev.slipway.managed"
	LabelDeployment = "dev.slipway.deployment"
	LabelRevision   = "dev.slipway.revision"
	LabelRole       = "dev.slipway.role" // agent, init, sidecar, data, volume, network, image
	LabelName       = "dev.slipway.deployment-name"
	// LabelWorkspace is on revision images: the workspace whose deployments
	// may use the image (see ownImage).
	LabelWorkspace = "dev.slipway.workspace"
	// LabelInstance is the install's identity (storage.InstanceID) on
	// every object: several installs may share one engine, and each
	// touches only what carries its own id (see Driver.ours).
	LabelInstance = "dev.slipway.instance"
	// LabelBase is on revision images: the agent base image they were
	// built from, which image collection keeps while they exist.
	LabelBase = "dev.slipway.base"
)

// resourceSpec is the part of the control plane's ResourceSpec that has a
// Docker equivalent; it is decoded from runtime.Spec.ResourceSpec. Limits
// already carry their derived defaults (the control plane normalises them).
type resourceSpec struct {
	CPU            *float64          `json:"cpu"`
	CPULimit       *float64          `json:"cpu_limit"`
	MemoryMB       *int              `json:"memory_mb"`
	MemoryLimitMB  *int              `json:"memory_limit_mb"`
	Labels         map[string]string `json:"labels"`
	Annotations    map[string]string `json:"annotations"`
	Volumes        []volumeSpec      `json:"volumes"`
	VolumeMounts   []volumeMount     `json:"volume_mounts"`
	InitContainers []containerSpec   `json:"init_containers"`
	Sidecars       []containerSpec   `json:"sidecars"`
}

type volumeSpec struct {
	Name                  string         `json:"name"`
	ConfigMap             map[string]any `json:"configMap"`
	Secret                map[string]any `json:"secret"`
	EmptyDir              map[string]any `json:"emptyDir"`
	PersistentVolumeClaim map[string]any `json:"persistentVolumeClaim"`
	NFS                   map[string]any `json:"nfs"`
	Projected             map[string]any `json:"projected"`
	DownwardAPI           map[string]any `json:"downwardAPI"`
	CSI                   map[string]any `json:"csi"`
	// sources names every source key the volume sets, known or not.
	sources []string
}

// UnmarshalJSON keeps the names of all the volume's sources besides
// decoding the known ones: a source this driver does not know (hostPath,
// say, which would mount a path of Slipway's host) must fail the deploy
// rather than pass for a volume without a source, which is an emptyDir.
func (v *volumeSpec) UnmarshalJSON(b []byte) error {
	type plain volumeSpec
	if err := json.Unmarshal(b, (*plain)(v)); err != nil {
		return err
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return err
	}
	v.sources = v.sources[:0]
	for k, raw := range keys {
		if k != "name" && string(raw) != "null" {
			v.sources = append(v.sources, k)
		}
	}
	sort.Strings(v.sources)
	return nil
}

type volumeMount struct {
	Name      string  `json:"name"`
	MountPath string  `json:"mountPath"`
	SubPath   *string `json:"subPath"`
	ReadOnly  *bool   `json:"readOnly"`
}

type containerSpec struct {
	Name            string        `json:"name"`
	Image           string        `json:"image"`
	ImagePullPolicy *string       `json:"imagePullPolicy"`
	Command         []string      `json:"command"`
	Args            []string      `json:"args"`
	WorkingDir      *string       `json:"workingDir"`
	Env             []envVar      `json:"env"`
	Resources       *requirements `json:"resources"`
	VolumeMounts    []volumeMount `json:"volumeMounts"`
	RestartPolicy   *string       `json:"restartPolicy"`
}

type envVar struct {
	Name      string         `json:"name"`
	Value     *string        `json:"value"`
	ValueFrom map[string]any `json:"valueFrom"`
}

type requirements struct {
	Limits   map[string]string `json:"limits"`
	Requests map[string]string `json:"requests"`
}

type secretReference struct {
	Name       string `json:"name"`
	SecretName string `json:"secret_name"`
	SecretKey  string `json:"secret_key"`
}

// plan is everything Deploy creates for one revision, computed up front
// so an unsupported spec fails before anything is touched.
type plan struct {
	env       []string          // main container environment (secrets, references)
	labels    map[string]string // user labels and annotations, then ours
	resources container.Resources
	mounts    []mount.Mount // main container, besides the agent's data volume
	volumes   []namedVolume // volumes to create
	inits     []sidecar
	sidecars  []sidecar
}

type namedVolume struct {
	name       string
	perRevison bool // emptyDir: removed with the revision
}

type sidecar struct {
	name       string
	image      string
	pullPolicy string
	entrypoint []string
	cmd        []string
	workingDir string
	env        []string
	resources  container.Resources
	mounts     []mount.Mount
	restart    container.RestartPolicyMode
}

// volumeName is the Docker volume behind a pod volume: emptyDir volumes
// live as long as the revision, persistentVolumeClaim volumes as long as
// the deployment (named after the claim, so revisions share them).
func volumeName(dep, rev string, v volumeSpec) (string, bool, error) {
	for _, k := range v.sources {
		if !knownSources[k] {
			return "", false, fmt.Errorf("%w: volume %q has type %s, which the docker runtime does not support (supported: emptyDir, persistentVolumeClaim; "+
				"nothing of the host's filesystem is ever mounted)", runtime.ErrUnsupported, v.Name, k)
		}
	}
	if len(v.sources) > 1 {
		return "", false, fmt.Errorf("%w: volume %q has several sources (%s); give it one", runtime.ErrUnsupported, v.Name, strings.Join(v.sources, ", "))
	}
	none := v.ConfigMap == nil && v.Secret == nil && v.PersistentVolumeClaim == nil && v.NFS == nil &&
		v.Projected == nil && v.DownwardAPI == nil && v.CSI == nil
	switch {
	case v.EmptyDir != nil, none: // a volume without a source is an emptyDir, as in Kubernetes
		return "slipway-" + dep + "-" + rev + "-" + v.Name, true, nil
	case v.PersistentVolumeClaim != nil:
		claim, _ := v.PersistentVolumeClaim["claimName"].(string)
		if claim == "" {
			claim = v.Name
		}
		if !dnsLabel.MatchString(claim) {
			return "", false, fmt.Errorf("%w: volume %q: persistentVolumeClaim.claimName %q must be a DNS label", runtime.ErrUnsupported, v.Name, claim)
		}
		return "slipway-" + dep + "-pvc-" + claim, false, nil
	}
	kind := ""
	for _, k := range []struct {
		name string
		set  bool
	}{{"configMap", v.ConfigMap != nil}, {"secret", v.Secret != nil}, {"nfs", v.NFS != nil}, {"projected", v.Projected != nil},
		{"downwardAPI", v.DownwardAPI != nil}, {"csi", v.CSI != nil}} {
		if k.set {
			kind = k.name
			break
		}
	}
	return "", false, fmt.Errorf("%w: volume %q has type %s, which the docker runtime does not support (supported: emptyDir, persistentVolumeClaim)",
		runtime.ErrUnsupported, v.Name, kind)
}

// knownSources are the volume sources of the spec's Volume shape; only
// emptyDir and persistentVolumeClaim have a Docker equivalent here.
var knownSources = map[string]bool{"configMap": true, "secret": true, "emptyDir": true, "persistentVolumeClaim": true,
	"nfs": true, "projected": true, "downwardAPI": true, "csi": true}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// makePlan maps a revision's spec onto Docker. Secrets are resolved here
// and live only in the returned plan.
func makePlan(s runtime.Spec, secretsDir string) (*plan, error) {
	var rs resourceSpec
	if len(s.ResourceSpec) > 0 && string(s.ResourceSpec) != "null" {
		if err := json.Unmarshal(s.ResourceSpec, &rs); err != nil {
			return nil, fmt.Errorf("decode resource_spec: %w", err)
		}
	}
	p := &plan{labels: map[string]string{}}
	// Annotations have no Docker equivalent but labels; labels win a clash
	// since they are the more specific request.
	for k, v := range rs.Annotations {
		p.labels[k] = v
	}
	for k, v := range rs.Labels {
		p.labels[k] = v
	}
	env := make([]string, 0, len(s.Env))
	for k, v := range s.Env {
		env = append(env, k+"="+v)
	}
	var refs []secretReference
	if len(s.SecretReferences) > 0 && string(s.SecretReferences) != "null" {
		if err := json.Unmarshal(s.SecretReferences, &refs); err != nil {
			return nil, fmt.Errorf("decode secret_references: %w", err)
		}
	}
	for _, r := range refs {
		v, err := readSecret(secretsDir, r.SecretName, r.SecretKey)
		if err != nil {
			return nil, fmt.Errorf("secret reference %s: %w", r.Name, err)
		}
		env = append(env, r.Name+"="+v)
	}
	sort.Strings(env)
	p.env = env

	if rs.CPULimit != nil {
		p.resources.NanoCPUs = int64(math.Round(*rs.CPULimit * 1e9))
	}
	if rs.CPU != nil {
		// Relative weight: 1 core = 1024 shares, Docker's default weight.
		p.resources.CPUShares = int64(math.Round(*rs.CPU * 1024))
	}
	if rs.MemoryLimitMB != nil {
		p.resources.Memory = int64(*rs.MemoryLimitMB) << 20
	}
	if rs.MemoryMB != nil {
		p.resources.MemoryReservation = int64(*rs.MemoryMB) << 20
	}

	volumes := map[string]string{} // pod volume name → Docker volume
	for _, v := range rs.Volumes {
		name, perRev, err := volumeName(s.DeploymentID, s.RevisionID, v)
		if err != nil {
			return nil, err
		}
		volumes[v.Name] = name
		p.volumes = append(p.volumes, namedVolume{name: name, perRevison: perRev})
	}
	mounts := func(ms []volumeMount) ([]mount.Mount, error) {
		var out []mount.Mount
		for _, m := range ms {
			src, ok := volumes[m.Name]
			if !ok {
				return nil, fmt.Errorf("%w: volume mount %q names no volume", runtime.ErrUnsupported, m.Name)
			}
			mt := mount.Mount{Type: mount.TypeVolume, Source: src, Target: m.MountPath, ReadOnly: m.ReadOnly != nil && *m.ReadOnly}
			if m.SubPath != nil && *m.SubPath != "" {
				mt.VolumeOptions = &mount.VolumeOptions{Subpath: *m.SubPath}
			}
			out = append(out, mt)
		}
		return out, nil
	}
	var err error
	if p.mounts, err = mounts(rs.VolumeMounts); err != nil {
		return nil, err
	}
	for _, group := range []struct {
		in   []containerSpec
		out  *[]sidecar
		init bool
	}{{rs.InitContainers, &p.inits, true}, {rs.Sidecars, &p.sidecars, false}} {
		for _, c := range group.in {
			sc, err := makeSidecar(c, secretsDir, group.init)
			if err != nil {
				return nil, fmt.Errorf("container %q: %w", c.Name, err)
			}
			if sc.mounts, err = mounts(c.VolumeMounts); err != nil {
				return nil, fmt.Errorf("container %q: %w", c.Name, err)
			}
			*group.out = append(*group.out, sc)
		}
	}
	return p, nil
}

func makeSidecar(c containerSpec, secretsDir string, init bool) (sidecar, error) {
	sc := sidecar{name: c.Name, image: c.Image, entrypoint: c.Command, cmd: c.Args, pullPolicy: "IfNotPresent"}
	if c.ImagePullPolicy != nil {
		sc.pullPolicy = *c.ImagePullPolicy
	}
	if c.WorkingDir != nil {
		sc.workingDir = *c.WorkingDir
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil:
			ref, _ := e.ValueFrom["secretKeyRef"].(map[string]any)
			name, _ := ref["name"].(string)
			key, _ := ref["key"].(string)
			if name == "" || key == "" {
				return sc, fmt.Errorf("%w: env %s: only valueFrom.secretKeyRef {name, key} is supported", runtime.ErrUnsupported, e.Name)
			}
			v, err := readSecret(secretsDir, name, key)
			if err != nil {
				return sc, fmt.Errorf("env %s: %w", e.Name, err)
			}
			sc.env = append(sc.env, e.Name+"="+v)
		case e.Value != nil:
			sc.env = append(sc.env, e.Name+"="+*e.Value)
		default:
			sc.env = append(sc.env, e.Name+"=")
		}
	}
	if c.Resources != nil {
		// Limits bound the container; requests only reserve (memory) or
		// weigh (cpu), as in Kubernetes.
		if q, ok := c.Resources.Limits["cpu"]; ok {
			cores, err := ParseCPU(q)
			if err != nil {
				return sc, fmt.Errorf("resources.limits.cpu: %w", err)
			}
			sc.resources.NanoCPUs = int64(math.Round(cores * 1e9))
		}
		if q, ok := c.Resources.Requests["cpu"]; ok {
			cores, err := ParseCPU(q)
			if err != nil {
				return sc, fmt.Errorf("resources.requests.cpu: %w", err)
			}
			sc.resources.CPUShares = int64(math.Round(cores * 1024))
		}
		if q, ok := c.Resources.Limits["memory"]; ok {
			b, err := ParseBytes(q)
			if err != nil {
				return sc, fmt.Errorf("resources.limits.memory: %w", err)
			}
			sc.resources.Memory = b
		}
		if q, ok := c.Resources.Requests["memory"]; ok {
			b, err := ParseBytes(q)
			if err != nil {
				return sc, fmt.Errorf("resources.requests.memory: %w", err)
			}
			sc.resources.MemoryReservation = b
		}
	}
	switch {
	case init:
		sc.restart = container.RestartPolicyDisabled
	case c.RestartPolicy != nil && *c.RestartPolicy == "OnFailure":
		sc.restart = container.RestartPolicyOnFailure
	default:
		sc.restart = container.RestartPolicyUnlessStopped
	}
	return sc, nil
}

// readSecret reads a secret object's key. The Docker engine has no secret
// objects outside swarm, so Slipway keeps them as files laid out the way
// Kubernetes mounts a secret: <secrets dir>/<secret name>/<key>.
func readSecret(dir, name, key string) (string, error) {
	if !safeName(name) || !safeName(key) {
		return "", fmt.Errorf("%w: secret %q key %q: names may hold only letters, digits, '-', '_' and '.'", runtime.ErrUnsupported, name, key)
	}
	p := filepath.Join(dir, name, key)
	raw, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("%w: secret %s has no key %s (expected the file %s)", runtime.ErrUnsupported, name, key, p)
	}
	return strings.TrimRight(string(raw), "\n"), nil
}

// safeName is a Kubernetes object or secret key name; it can never name a
// parent directory, so a reference cannot read outside the secrets dir.
func safeName(s string) bool {
	return s != "." && s != ".." && validKey.MatchString(s)
}

var validKey = regexp.MustCompile(`^[-._a-zA-Z0-9]{1,253}$`)

// ParseCPU reads a Kubernetes CPU quantity ("500m", "0.5", "2") in cores.
func ParseCPU(q string) (float64, error) {
	s := strings.TrimSpace(q)
	mult := 1.0
	if strings.HasSuffix(s, "m") {
		s, mult = strings.TrimSuffix(s, "m"), 0.001
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) || v*mult > 1024 {
		return 0, fmt.Errorf("%w: %q is not a CPU quantity (cores such as 0.5, or millicores such as 500m)", runtime.ErrUnsupported, q)
	}
	return v * mult, nil
}

// ParseBytes reads a Kubernetes memory quantity ("128Mi", "1G", "1e6",
// "512") in bytes.
func ParseBytes(q string) (int64, error) {
	s := strings.TrimSpace(q)
	mult := 1.0
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	b := v * mult
	if err != nil || v < 0 || math.IsNaN(b) || b > 1<<50 {
		return 0, fmt.Errorf("%w: %q is not a memory quantity (bytes, or with a suffix such as 128Mi or 1G)", runtime.ErrUnsupported, q)
	}
	return int64(b), nil
}
