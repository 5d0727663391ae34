package docker

import (
	"context"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"

	"slipway/runtime"
)

// This file exports what the swarm runtime (runtime/swarm) reuses of this
// one, so that a revision means the same on both: the spec translation,
// the hardening and Slipway's own agent settings.

// AgentPlan is the part of a revision's plan that concerns the agent
// container: what a Swarm service can carry.
type AgentPlan struct {
	// Env is the revision's secrets and resolved secret references.
	Env       []string
	Labels    map[string]string // the spec's labels and annotations
	Resources container.Resources
	// Mounts are the spec's volume mounts (Docker volumes), besides the
	// agent's data volume; PerRevision names the volumes among them that
	// live only as long as the revision (emptyDir).
	Mounts      []mount.Mount
	PerRevision map[string]bool
	// Containers names the spec's init containers and sidecars.
	Containers []string
}

// PlanAgent maps a revision's spec as Deploy does, with the install's
// default memory limit applied.
func PlanAgent(s runtime.Spec, secretsDir string, defaultMemoryMB int) (AgentPlan, error) {
	p, err := makePlan(s, secretsDir)
	if err != nil {
		return AgentPlan{}, err
	}
	p.applyDefaultMemory(defaultMemoryMB)
	out := AgentPlan{Env: p.env, Labels: p.labels, Resources: p.resources, Mounts: p.mounts, PerRevision: map[string]bool{}}
	for _, v := range p.volumes {
		out.PerRevision[v.name] = v.perRevison
	}
	for _, c := range append(append([]sidecar(nil), p.inits...), p.sidecars...) {
		out.Containers = append(out.Containers, c.name)
	}
	return out, nil
}

// AgentEnv is Slipway's own settings for the agent (runtime.Spec.AgentEnv),
// sorted.
func AgentEnv(s runtime.Spec) []string { return agentEnv(s) }

// Harden applies the hardening every deployment container gets (see
// harden).
func Harden(hc *container.HostConfig, readOnly bool) *container.HostConfig {
	return harden(hc, readOnly)
}

// AgentUser is the unprivileged user the agent runs as in every image
// Slipway builds.
const AgentUser = agentUser

// Label returns the labels the docker runtime puts on an object of a
// deployment (rev and role may be ""), with d's install id.
func (d *Driver) Labels(dep, rev, role string) map[string]string { return d.labels(dep, rev, role) }

// Ours says whether an object with labels l belongs to this install (see
// ours); claimed: a deployment on record names it.
func (d *Driver) Ours(l map[string]string, claimed bool) bool { return d.ours(l, claimed) }

// RemoveOf removes a deployment's objects as Remove does; claimed: a
// deployment on record names it (see ours).
func (d *Driver) RemoveOf(ctx context.Context, dep string, claimed bool) error {
	return d.remove(ctx, dep, claimed)
}
