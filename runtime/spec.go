package runtime

import (
	"encoding/json"
	"math"
	"sort"
)

// The shapes of a deployment's resource_spec and secret_references, as the
// control plane's API accepts them (the `cp` tags are its input rules, see
// server/httpx/validate) and stores them, and as the drivers read them in
// Spec. They are declared here once so both sides agree by construction.

// ResourceSpec is the compute resources of a deployment. Every field is a
// pointer so that null/absent is distinguishable from zero. CPU is in cores
// (rounded to one decimal), memory in MB.
type ResourceSpec struct {
	MinScale           *int     `json:"min_scale"`
	MaxScale           *int     `json:"max_scale"`
	CPU                *float64 `json:"cpu"`
	CPULimit           *float64 `json:"cpu_limit"`
	MemoryMB           *int     `json:"memory_mb"`
	MemoryLimitMB      *int     `json:"memory_limit_mb"`
	QueueMinScale      *int     `json:"queue_min_scale"`
	QueueMaxScale      *int     `json:"queue_max_scale"`
	QueueCPU           *float64 `json:"queue_cpu"`
	QueueCPULimit      *float64 `json:"queue_cpu_limit"`
	QueueMemoryMB      *int     `json:"queue_memory_mb"`
	QueueMemoryLimitMB *int     `json:"queue_memory_limit_mb"`

	// Marked "do not use" by the spec: accepted, validated, not acted on.
	OrchestratorCPU           *float64 `json:"orchestrator_cpu"`
	OrchestratorCPULimit      *float64 `json:"orchestrator_cpu_limit"`
	OrchestratorMemoryMB      *int     `json:"orchestrator_memory_mb"`
	OrchestratorMemoryLimitMB *int     `json:"orchestrator_memory_limit_mb"`
	OrchestratorMinScale      *int     `json:"orchestrator_min_scale"`
	OrchestratorMaxScale      *int     `json:"orchestrator_max_scale"`
	ExecutorCPU               *float64 `json:"executor_cpu"`
	ExecutorCPULimit          *float64 `json:"executor_cpu_limit"`
	ExecutorMemoryMB          *int     `json:"executor_memory_mb"`
	ExecutorMemoryLimitMB     *int     `json:"executor_memory_limit_mb"`

	RedisCPU           *float64 `json:"redis_cpu"`
	RedisCPULimit      *float64 `json:"redis_cpu_limit"`
	RedisMemoryMB      *int     `json:"redis_memory_mb"`
	RedisMemoryLimitMB *int     `json:"redis_memory_limit_mb"`

	Labels             map[string]string      `json:"labels"`
	Annotations        map[string]string      `json:"annotations"`
	ServiceAccountName *string                `json:"service_account_name"`
	ImagePullSecrets   []LocalObjectReference `json:"image_pull_secrets"`
	Volumes            []Volume               `json:"volumes"`
	VolumeMounts       []VolumeMount          `json:"volume_mounts"`
	InitContainers     []Container            `json:"init_containers"`
	Sidecars           []Container            `json:"sidecars"`

	DBCPU            *float64 `json:"db_cpu"`
	DBCPULimit       *float64 `json:"db_cpu_limit"`
	DBMemoryMB       *int     `json:"db_memory_mb"`
	DBMemoryLimitMB  *int     `json:"db_memory_limit_mb"`
	DBStorageGi      *int     `json:"db_storage_gi"`
	DBMaxConnections *int     `json:"db_max_connections"`
}

// SecretReference fills an environment variable from an existing secret
// object of the container orchestrator (external_docker only).
type SecretReference struct {
	Name       string `json:"name" cp:"required"`
	SecretName string `json:"secret_name" cp:"required"`
	SecretKey  string `json:"secret_key" cp:"required"`
}

// LocalObjectReference names an object in the deployment's namespace.
type LocalObjectReference struct {
	Name string `json:"name" cp:"required"`
}

// Volume is a pod volume; the source objects are free-form.
type Volume struct {
	Name                  string         `json:"name" cp:"required"`
	ConfigMap             map[string]any `json:"configMap,omitempty"`
	Secret                map[string]any `json:"secret,omitempty"`
	EmptyDir              map[string]any `json:"emptyDir,omitempty"`
	PersistentVolumeClaim map[string]any `json:"persistentVolumeClaim,omitempty"`
	NFS                   map[string]any `json:"nfs,omitempty"`
	Projected             map[string]any `json:"projected,omitempty"`
	DownwardAPI           map[string]any `json:"downwardAPI,omitempty"`
	CSI                   map[string]any `json:"csi,omitempty"`

	// decoded names every source key the decoded JSON set, known or not
	// (nil for a Volume built in code).
	decoded []string
}

// UnmarshalJSON keeps the names of all the volume's sources besides
// decoding the known ones: a driver must refuse a source it does not know
// (hostPath, say, which would mount a path of Slipway's host) rather than
// take the volume for one without a source, which is an emptyDir.
func (v *Volume) UnmarshalJSON(b []byte) error {
	type plain Volume
	if err := json.Unmarshal(b, (*plain)(v)); err != nil {
		return err
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return err
	}
	v.decoded = []string{}
	for k, raw := range keys {
		if k != "name" && string(raw) != "null" {
			v.decoded = append(v.decoded, k)
		}
	}
	sort.Strings(v.decoded)
	return nil
}

// Sources names the volume's sources (its JSON keys besides name), sorted.
func (v *Volume) Sources() []string {
	if v.decoded != nil {
		return v.decoded
	}
	var out []string
	for _, s := range []struct {
		key string
		set bool
	}{{"configMap", v.ConfigMap != nil}, {"csi", v.CSI != nil}, {"downwardAPI", v.DownwardAPI != nil},
		{"emptyDir", v.EmptyDir != nil}, {"nfs", v.NFS != nil}, {"persistentVolumeClaim", v.PersistentVolumeClaim != nil},
		{"projected", v.Projected != nil}, {"secret", v.Secret != nil}} {
		if s.set {
			out = append(out, s.key)
		}
	}
	return out
}

// VolumeMount mounts a Volume (by name) into a container.
type VolumeMount struct {
	Name             string  `json:"name" cp:"required"`
	MountPath        string  `json:"mountPath" cp:"required"`
	SubPath          *string `json:"subPath,omitempty"`
	MountPropagation *string `json:"mountPropagation,omitempty"`
	ReadOnly         *bool   `json:"readOnly,omitempty"`
	SubPathExpr      *string `json:"subPathExpr,omitempty"`
}

// Container is an init container or sidecar.
type Container struct {
	Name            string                `json:"name" cp:"required"`
	Image           string                `json:"image" cp:"required"`
	ImagePullPolicy *string               `json:"imagePullPolicy,omitempty"`
	Command         []string              `json:"command,omitempty"`
	Args            []string              `json:"args,omitempty"`
	WorkingDir      *string               `json:"workingDir,omitempty"`
	Env             []EnvVar              `json:"env,omitempty"`
	EnvFrom         []map[string]any      `json:"envFrom,omitempty"`
	Resources       *ResourceRequirements `json:"resources,omitempty"`
	VolumeMounts    []VolumeMount         `json:"volumeMounts,omitempty"`
	SecurityContext map[string]any        `json:"securityContext,omitempty"`
	RestartPolicy   *string               `json:"restartPolicy,omitempty"`
}

// EnvVar is an environment variable of a Container.
type EnvVar struct {
	Name      string         `json:"name" cp:"required"`
	Value     *string        `json:"value,omitempty"`
	ValueFrom map[string]any `json:"valueFrom,omitempty"`
}

// ResourceRequirements of a Container (Kubernetes quantity strings).
type ResourceRequirements struct {
	Limits   map[string]string `json:"limits,omitempty"`
	Requests map[string]string `json:"requests,omitempty"`
}

// RoundCPU rounds a CPU value to one decimal place (half away from zero).
func RoundCPU(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > 1e15 {
		return v
	}
	return math.Round(v*10) / 10
}

// Normalize rounds every CPU value to one decimal and fills the derived
// defaults of the spec: a limit defaults to 2× its request (redis memory:
// 1×), queue values default to the API values.
func (r *ResourceSpec) Normalize() {
	if r == nil {
		return
	}
	for _, p := range []**float64{&r.CPU, &r.CPULimit, &r.QueueCPU, &r.QueueCPULimit,
		&r.OrchestratorCPU, &r.OrchestratorCPULimit, &r.ExecutorCPU, &r.ExecutorCPULimit,
		&r.RedisCPU, &r.RedisCPULimit, &r.DBCPU, &r.DBCPULimit} {
		if *p != nil {
			x := RoundCPU(**p)
			*p = &x
		}
	}
	twiceF := func(dst **float64, src *float64) {
		if *dst == nil && src != nil {
			x := RoundCPU(2 * *src)
			*dst = &x
		}
	}
	mulI := func(dst **int, src *int, k int) {
		if *dst == nil && src != nil {
			x := *src
			if x <= math.MaxInt/2 && x >= math.MinInt/2 {
				x *= k
			}
			*dst = &x
		}
	}
	copyI := func(dst **int, src *int) { mulI(dst, src, 1) }
	copyF := func(dst **float64, src *float64) {
		if *dst == nil && src != nil {
			x := *src
			*dst = &x
		}
	}
	twiceF(&r.CPULimit, r.CPU)
	mulI(&r.MemoryLimitMB, r.MemoryMB, 2)
	copyI(&r.QueueMinScale, r.MinScale)
	copyI(&r.QueueMaxScale, r.MaxScale)
	copyF(&r.QueueCPU, r.CPU)
	copyI(&r.QueueMemoryMB, r.MemoryMB)
	twiceF(&r.QueueCPULimit, r.QueueCPU)
	mulI(&r.QueueMemoryLimitMB, r.QueueMemoryMB, 2)
	twiceF(&r.RedisCPULimit, r.RedisCPU)
	copyI(&r.RedisMemoryLimitMB, r.RedisMemoryMB)
	twiceF(&r.DBCPULimit, r.DBCPU)
	mulI(&r.DBMemoryLimitMB, r.DBMemoryMB, 2)
}
