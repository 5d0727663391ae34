package docker

import (
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

// plan is everything Deploy creates for one revision, computed up front
// so an unsupported spec fails before anything is touched.
type plan struct {
	env       []string          // main container environment (secrets, references)
	labels    map[string]string // user labels and annotations, then ours
	resources container.Resources
	queue     container.Resources // a scaled revision's queue workers' (replicas.go)
	mounts    []mount.Mount       // main container, besides the agent's data volume
	volumes   []namedVolume       // volumes to create
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
func volumeName(dep, rev string, v runtime.Volume) (string, bool, error) {
	sources := v.Sources()
	for _, k := range sources {
		if !knownSources[k] {
			return "", false, fmt.Errorf("%w: volume %q has type %s, which the docker runtime does not support (supported: emptyDir, persistentVolumeClaim; "+
				"nothing of the host's filesystem is ever mounted)", runtime.ErrUnsupported, v.Name, k)
		}
	}
	if len(sources) > 1 {
		return "", false, fmt.Errorf("%w: volume %q has several sources (%s); give it one", runtime.ErrUnsupported, v.Name, strings.Join(sources, ", "))
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
	return "", false, fmt.Errorf("%w: volume %q has type %s, which the docker runtime does not support (supported: emptyDir, persistentVolumeClaim)",
		runtime.ErrUnsupported, v.Name, strings.Join(sources, ""))
}

// knownSources are the volume sources of the spec's Volume shape; only
// emptyDir and persistentVolumeClaim have a Docker equivalent here.
var knownSources = map[string]bool{"configMap": true, "secret": true, "emptyDir": true, "persistentVolumeClaim": true,
	"nfs": true, "projected": true, "downwardAPI": true, "csi": true}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// makePlan maps a revision's spec onto Docker. Secrets are resolved here
// and live only in the returned plan.
func makePlan(s runtime.Spec, secretsDir string) (*plan, error) {
	rs := s.ResourceSpec
	if rs == nil {
		rs = &runtime.ResourceSpec{}
	}
	p := &plan{labels: planLabels(rs), resources: planResources(rs)}
	var err error
	if p.env, err = planEnv(s, secretsDir); err != nil {
		return nil, err
	}
	volumes, err := p.planVolumes(s, rs)
	if err != nil {
		return nil, err
	}
	if p.mounts, err = volumeMounts(rs.VolumeMounts, volumes); err != nil {
		return nil, err
	}
	if p.inits, err = makeSidecars(rs.InitContainers, volumes, secretsDir, true); err != nil {
		return nil, err
	}
	if p.sidecars, err = makeSidecars(rs.Sidecars, volumes, secretsDir, false); err != nil {
		return nil, err
	}
	return p, nil
}

// planLabels is the user's labels and annotations: annotations have no
// Docker equivalent but labels; labels win a clash since they are the more
// specific request.
func planLabels(rs *runtime.ResourceSpec) map[string]string {
	labels := map[string]string{}
	for k, v := range rs.Annotations {
		labels[k] = v
	}
	for k, v := range rs.Labels {
		labels[k] = v
	}
	return labels
}

// planEnv is the main container's environment: the revision's secrets and
// its secret references, resolved from secretsDir, sorted.
func planEnv(s runtime.Spec, secretsDir string) ([]string, error) {
	env := make([]string, 0, len(s.Env)+len(s.SecretReferences))
	for k, v := range s.Env {
		env = append(env, k+"="+v)
	}
	for _, r := range s.SecretReferences {
		v, err := readSecret(secretsDir, r.SecretName, r.SecretKey)
		if err != nil {
			return nil, fmt.Errorf("secret reference %s: %w", r.Name, err)
		}
		env = append(env, r.Name+"="+v)
	}
	sort.Strings(env)
	return env, nil
}

// agentEnv is Slipway's own settings for the agent, after the secrets so
// that they win; sorted, so the container's config is stable.
func agentEnv(s runtime.Spec) []string {
	env := make([]string, 0, len(s.AgentEnv))
	for k, v := range s.AgentEnv {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env
}

// planResources maps the main container's cpu and memory.
func planResources(rs *runtime.ResourceSpec) container.Resources {
	var r container.Resources
	if rs.CPULimit != nil {
		r.NanoCPUs = int64(math.Round(*rs.CPULimit * 1e9))
	}
	if rs.CPU != nil {
		// Relative weight: 1 core = 1024 shares, Docker's default weight.
		r.CPUShares = int64(math.Round(*rs.CPU * 1024))
	}
	if rs.MemoryLimitMB != nil {
		r.Memory = int64(*rs.MemoryLimitMB) << 20
	}
	if rs.MemoryMB != nil {
		r.MemoryReservation = int64(*rs.MemoryMB) << 20
	}
	return r
}

// planVolumes adds the Docker volume behind each pod volume to p and
// returns the map from pod volume name to Docker volume.
func (p *plan) planVolumes(s runtime.Spec, rs *runtime.ResourceSpec) (map[string]string, error) {
	volumes := map[string]string{}
	for _, v := range rs.Volumes {
		name, perRev, err := volumeName(s.DeploymentID, s.RevisionID, v)
		if err != nil {
			return nil, err
		}
		volumes[v.Name] = name
		p.volumes = append(p.volumes, namedVolume{name: name, perRevison: perRev})
	}
	return volumes, nil
}

// volumeMounts maps pod volume mounts onto the Docker volumes.
func volumeMounts(ms []runtime.VolumeMount, volumes map[string]string) ([]mount.Mount, error) {
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

// makeSidecars maps init containers (init) or sidecars with their mounts.
func makeSidecars(cs []runtime.Container, volumes map[string]string, secretsDir string, init bool) ([]sidecar, error) {
	var out []sidecar
	for _, c := range cs {
		sc, err := makeSidecar(c, secretsDir, init)
		if err != nil {
			return nil, fmt.Errorf("container %q: %w", c.Name, err)
		}
		if sc.mounts, err = volumeMounts(c.VolumeMounts, volumes); err != nil {
			return nil, fmt.Errorf("container %q: %w", c.Name, err)
		}
		out = append(out, sc)
	}
	return out, nil
}

func makeSidecar(c runtime.Container, secretsDir string, init bool) (sidecar, error) {
	sc := sidecar{name: c.Name, image: c.Image, entrypoint: c.Command, cmd: c.Args, pullPolicy: "IfNotPresent",
		restart: restartPolicy(c, init)}
	if c.ImagePullPolicy != nil {
		sc.pullPolicy = *c.ImagePullPolicy
	}
	if c.WorkingDir != nil {
		sc.workingDir = *c.WorkingDir
	}
	var err error
	if sc.env, err = containerEnv(c.Env, secretsDir); err != nil {
		return sc, err
	}
	if c.Resources != nil {
		sc.resources, err = containerResources(c.Resources)
	}
	return sc, err
}

// containerEnv resolves a container's environment; a valueFrom may only
// name a secret key.
func containerEnv(vars []runtime.EnvVar, secretsDir string) ([]string, error) {
	var env []string
	for _, e := range vars {
		switch {
		case e.ValueFrom != nil:
			ref, _ := e.ValueFrom["secretKeyRef"].(map[string]any)
			name, _ := ref["name"].(string)
			key, _ := ref["key"].(string)
			if name == "" || key == "" {
				return nil, fmt.Errorf("%w: env %s: only valueFrom.secretKeyRef {name, key} is supported", runtime.ErrUnsupported, e.Name)
			}
			v, err := readSecret(secretsDir, name, key)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			env = append(env, e.Name+"="+v)
		case e.Value != nil:
			env = append(env, e.Name+"="+*e.Value)
		default:
			env = append(env, e.Name+"=")
		}
	}
	return env, nil
}

// containerResources maps a container's Kubernetes quantities: limits
// bound the container; requests only reserve (memory) or weigh (cpu), as
// in Kubernetes.
func containerResources(req *runtime.ResourceRequirements) (container.Resources, error) {
	var r container.Resources
	for _, step := range []func() error{
		func() error {
			return quantity(req.Limits, "limits", "cpu", ParseCPU, func(c float64) { r.NanoCPUs = int64(math.Round(c * 1e9)) })
		},
		func() error {
			return quantity(req.Requests, "requests", "cpu", ParseCPU, func(c float64) { r.CPUShares = int64(math.Round(c * 1024)) })
		},
		func() error {
			return quantity(req.Limits, "limits", "memory", ParseBytes, func(b int64) { r.Memory = b })
		},
		func() error {
			return quantity(req.Requests, "requests", "memory", ParseBytes, func(b int64) { r.MemoryReservation = b })
		},
	} {
		if err := step(); err != nil {
			return r, err
		}
	}
	return r, nil
}

// quantity parses m[key], when set, and hands the value to set.
func quantity[T any](m map[string]string, what, key string, parse func(string) (T, error), set func(T)) error {
	q, ok := m[key]
	if !ok {
		return nil
	}
	v, err := parse(q)
	if err != nil {
		return fmt.Errorf("resources.%s.%s: %w", what, key, err)
	}
	set(v)
	return nil
}

// restartPolicy is an init container's (none: it runs once) or a
// sidecar's.
func restartPolicy(c runtime.Container, init bool) container.RestartPolicyMode {
	switch {
	case init:
		return container.RestartPolicyDisabled
	case c.RestartPolicy != nil && *c.RestartPolicy == "OnFailure":
		return container.RestartPolicyOnFailure
	default:
		return container.RestartPolicyUnlessStopped
	}
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
