package swarm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/api/types/swarm"

	"slipway/runtime"
	"slipway/runtime/docker"
)

// agentPort is where the agent listens in its container (the image's
// SLIPWAY_AGENT_ADDR).
const agentPort = 8000

// envSecretPrefix names the files, under /run/secrets, that hold the
// revision's environment secrets: env.<NAME>. The task entry (task.go)
// loads them into the agent's environment.
const envSecretPrefix = "env."

// refSecretPrefix names the files of referenced Swarm secrets: ref.<NAME>.
// Their trailing newlines go, as the docker runtime reads a referenced
// secret (docker secret create from a file keeps the file's newline).
const refSecretPrefix = "ref."

// LabelEnv is on a Swarm secret Slipway owns: the environment variable
// it holds.
const LabelEnv = "dev.slipway.env"

func serviceName(dep string) string { return "slipway-" + dep }
func networkName(dep string) string { return "slipway-" + dep }
func dataVolume(dep string) string  { return "slipway-" + dep + "-data" }

// ownSecretName is the Swarm secret holding one of the revision's own
// secrets. Swarm secrets cannot change, and a rollback needs the previous
// revision's values, so each revision has its own; names are at most 64
// characters, so a hash of what identifies it (never of the value).
func ownSecretName(dep, rev, env string) string {
	h := sha256.Sum256([]byte(dep + "\x00" + rev + "\x00" + env))
	return "slipway-" + hex.EncodeToString(h[:16])
}

// referencedSecretName is the existing Swarm secret a secret_reference
// names: a Swarm secret holds one value where a Kubernetes secret holds
// keys, so the key is part of its name: <secret_name>.<secret_key>.
func referencedSecretName(r runtime.SecretReference) string { return r.SecretName + "." + r.SecretKey }

// replicas is the API service's replica count: min_scale for a scaled
// revision (runtime.Scale), else one agent doing everything. The queue
// workers are a service of their own (scale.go).
func replicas(s runtime.Spec) uint64 { return uint64(max(s.Scale.API, 1)) }

// taskSpec is what serviceSpec needs beyond the revision's spec.
type taskSpec struct {
	image string
	// slipwayImage: the image's entrypoint is Slipway's agent, so the task
	// entry and the health probe are in it (/slipway).
	slipwayImage  bool
	token         string
	secrets       []*swarm.SecretReference
	healthTimeout time.Duration
	stopGrace     time.Duration
	monitor       time.Duration
}

// serviceSpec maps a revision onto a Swarm service: the same plan, labels
// and hardening as the docker runtime (runtime/docker), as far as a
// service can express them (see the README's swarm section for what it
// cannot).
func (d *Driver) serviceSpec(s runtime.Spec, p docker.AgentPlan, t taskSpec) swarm.ServiceSpec {
	dep, rev := s.DeploymentID, s.RevisionID
	readOnly := s.Source == "internal_source"
	hc := docker.Harden(&container.HostConfig{}, readOnly)

	own := append([]string{"SLIPWAY_AGENT_DATA_DIR=/data"}, docker.AgentEnv(s)...)
	if t.token != "" {
		// The port is published on every node: the agent answers only
		// requests carrying its token (runtime.AgentTokenHeader).
		own = append(own, "SLIPWAY_AGENT_TOKEN="+t.token)
	}
	labels := d.Docker.Labels(dep, rev, "agent")
	labels[docker.LabelName] = s.DeploymentName
	cs := &swarm.ContainerSpec{
		Image:           t.image,
		Labels:          merge(p.Labels, labels),
		Env:             runtime.Settle(p.Env, own),
		Privileges:      &swarm.Privileges{NoNewPrivileges: slices.Contains(hc.SecurityOpt, "no-new-privileges")},
		ReadOnly:        hc.ReadonlyRootfs,
		CapabilityDrop:  hc.CapDrop,
		CapabilityAdd:   hc.CapAdd,
		StopGracePeriod: &t.stopGrace,
		Secrets:         t.secrets,
	}
	dataLabels := d.Docker.Labels(dep, "", "data")
	cs.Mounts = append(cs.Mounts, mount.Mount{Type: mount.TypeVolume, Source: dataVolume(dep), Target: "/data",
		VolumeOptions: &mount.VolumeOptions{Labels: dataLabels}})
	for _, m := range p.Mounts {
		role, r := "volume", ""
		if p.PerRevision[m.Source] {
			r = rev
		}
		if m.VolumeOptions == nil {
			m.VolumeOptions = &mount.VolumeOptions{}
		}
		// A task creates its volumes on the node it runs on: the labels
		// make them this install's there too.
		m.VolumeOptions.Labels = d.Docker.Labels(dep, r, role)
		cs.Mounts = append(cs.Mounts, m)
	}
	for target, opts := range hc.Tmpfs {
		cs.Mounts = append(cs.Mounts, tmpfsMount(target, opts))
	}
	if t.slipwayImage {
		cs.Command = []string{"/slipway", TaskSubcommand, "run"}
		cs.Healthcheck = &container.HealthConfig{
			Test:     []string{"CMD", "/slipway", TaskSubcommand, "probe"},
			Interval: time.Second, Timeout: 2 * time.Second, Retries: 3,
			// Failures while the agent starts do not count; the first
			// success makes it healthy at once.
			StartPeriod: t.healthTimeout,
		}
	}

	res := &swarm.ResourceRequirements{Limits: &swarm.Limit{NanoCPUs: p.Resources.NanoCPUs, MemoryBytes: p.Resources.Memory},
		Reservations: &swarm.Resources{MemoryBytes: p.Resources.MemoryReservation}}
	if hc.PidsLimit != nil {
		res.Limits.Pids = *hc.PidsLimit
	}
	if rs := s.ResourceSpec; rs != nil && rs.CPU != nil {
		res.Reservations.NanoCPUs = int64(math.Round(*rs.CPU * 1e9))
	}
	delay := time.Second
	order := updateOrder(s)
	update := &swarm.UpdateConfig{Parallelism: 1, Order: order,
		FailureAction: swarm.UpdateFailureActionRollback, Monitor: t.monitor}
	rollback := &swarm.UpdateConfig{Parallelism: 1, Order: order,
		FailureAction: swarm.UpdateFailureActionPause, Monitor: t.monitor}
	n := replicas(s)
	svcLabels := d.Docker.Labels(dep, rev, "service")
	svcLabels[docker.LabelName] = s.DeploymentName
	return swarm.ServiceSpec{
		Annotations: swarm.Annotations{Name: serviceName(dep), Labels: svcLabels},
		TaskTemplate: swarm.TaskSpec{
			ContainerSpec: cs,
			Resources:     res,
			RestartPolicy: &swarm.RestartPolicy{Condition: swarm.RestartPolicyConditionAny, Delay: &delay},
			Networks:      []swarm.NetworkAttachmentConfig{{Target: networkName(dep)}},
		},
		Mode:           swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &n}},
		UpdateConfig:   update,
		RollbackConfig: rollback,
		// Each task publishes the agent's port on a port of its node's
		// own choosing (mode host): two tasks of a start-first update run
		// side by side on one node, and the routing mesh (ingress) needs
		// IPVS, which not every host has. Slipway finds the port of the
		// task serving (driver.go, taskEndpoint).
		EndpointSpec: &swarm.EndpointSpec{Mode: swarm.ResolutionModeVIP, Ports: []swarm.PortConfig{{
			Protocol: network.TCP, TargetPort: agentPort, PublishMode: swarm.PortConfigPublishModeHost}}},
	}
}

// updateOrder is how a new revision replaces the running one. An agent
// whose state is in PostgreSQL (SLIPWAY_AGENT_POSTGRES_URL) starts beside
// the old one, which stops once the new one is healthy (start-first). An
// agent whose state is the database file on its data volume holds that
// file's lock, which a second agent would wait for in vain: the old task
// stops first, and Slipway holds requests at the gate meanwhile (as the
// docker runtime does); the health gate and Swarm's rollback apply alike.
func updateOrder(s runtime.Spec) swarm.UpdateOrder {
	if s.AgentEnv["SLIPWAY_AGENT_POSTGRES_URL"] != "" {
		return swarm.UpdateOrderStartFirst
	}
	return swarm.UpdateOrderStopFirst
}

// tmpfsMount is the docker runtime's tmpfs (a HostConfig.Tmpfs entry) as
// a service mount: its size and mode carry over; uid and gid cannot be
// said before API 1.46, nor nosuid/nodev (a service's tmpfs mounts get the
// engine's defaults), so /tmp is world-writable and sticky instead.
func tmpfsMount(target, opts string) mount.Mount {
	to := &mount.TmpfsOptions{}
	for _, o := range strings.Split(opts, ",") {
		k, v, _ := strings.Cut(o, "=")
		switch k {
		case "size":
			// tmpfs sizes are binary: 256m is 256 MiB.
			q := v
			for suf, bin := range map[string]string{"k": "Ki", "m": "Mi", "g": "Gi"} {
				if strings.HasSuffix(q, suf) {
					q = strings.TrimSuffix(q, suf) + bin
				}
			}
			if b, err := docker.ParseBytes(q); err == nil {
				to.SizeBytes = b
			}
		case "mode":
			if m, err := strconv.ParseUint(v, 8, 32); err == nil {
				to.Mode = os.FileMode(m) // as the docker CLI's tmpfs-mode: 1777 keeps its sticky bit
			}
		}
	}
	return mount.Mount{Type: mount.TypeTmpfs, Target: target, TmpfsOptions: to}
}

func merge(user, ours map[string]string) map[string]string {
	out := make(map[string]string, len(user)+len(ours))
	for k, v := range user {
		out[k] = v
	}
	for k, v := range ours {
		out[k] = v // ours win: reconciliation depends on them
	}
	return out
}

// checkPlan refuses what a service cannot run: a pod's init containers
// and sidecars have no Swarm equivalent (a service is one container).
func checkPlan(p docker.AgentPlan) error {
	if len(p.Containers) > 0 {
		return fmt.Errorf("%w: init_containers and sidecars (%s) are not supported on the swarm runtime; a Swarm service runs one container",
			runtime.ErrUnsupported, strings.Join(p.Containers, ", "))
	}
	return nil
}
