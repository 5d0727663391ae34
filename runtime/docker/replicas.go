package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"slipway/runtime"
)

// A scaled revision (runtime.Scale) runs as a group of agent containers:
// its API replicas and queue workers, each a container of its own with its
// sidecars, its replica environment (role, worker id, share of the
// database connections), its own data volume (its language hosts' files;
// the state is in PostgreSQL and Redis), the same hardening, and the
// spec's cpu/memory (API replicas) or queue_cpu/queue_memory (workers).
// Each is reached on its own address on the deployment network, restarted
// by its restart policy when it exits, and health-checked on its own: the
// proxy spreads requests over the API replicas that answer GET /ok now
// (Endpoints), and the revision serves while one does. A deploy, rollback
// or switch replaces the whole group, stopping the previous one first
// behind the gate as for one agent (and as the process runtime does): two
// revisions' workers never claim runs from the one queue at once, and no
// request sees a mix of revisions.
//
// Names, beside those in driver.go:
//
//	container slipway-<deployment>-<revision>-<replica>[-<sidecar name>]
//	container slipway-<deployment>-<revision>-init-<init container name>
//	volume    slipway-<deployment>-data-<replica>
//
// An unscaled revision keeps its one container and names exactly.

const (
	// LabelReplica names the replica (api-0, queue-1, ...) of a scaled
	// revision's agent and sidecar containers; restart adoption finds the
	// group by it.
	LabelReplica = "dev.slipway.replica"
	// LabelReplicaRole is the replica's agent role: all, api or queue.
	LabelReplicaRole = "dev.slipway.replica-role"
)

// member is one agent container of a scaled revision.
type member struct {
	name, role, container string
	endpoint              string // under Driver.mu: it moves when the container restarts
	up                    bool   // under Driver.mu: answered its last health check
}

func (m *member) api() bool { return m.role != "queue" }

func replicaContainer(dep, rev string, r runtime.Replica) string {
	return agentName(dep, rev) + "-" + r.Name
}

func replicaVolume(dep string, r runtime.Replica) string { return dataVolume(dep) + "-" + r.Name }

// replicaEnv is what the replica's agent is told besides the spec's agent
// environment, sorted.
func replicaEnv(r runtime.Replica) []string {
	env := make([]string, 0, len(r.Env))
	for k, v := range r.Env {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env
}

// replicaLabels names replica r on a container's labels (nothing for an
// unscaled deployment's one agent).
func replicaLabels(l map[string]string, r runtime.Replica) {
	if r.Name == "" {
		return
	}
	l[LabelReplica] = r.Name
	l[LabelReplicaRole] = r.Role
}

// queueResources maps the queue workers' queue_cpu and queue_memory
// fields (normalized from cpu and memory when unset) as planResources
// maps the API replicas'.
func queueResources(rs *runtime.ResourceSpec) container.Resources {
	if rs == nil {
		return container.Resources{}
	}
	return planResources(&runtime.ResourceSpec{CPU: rs.QueueCPU, CPULimit: rs.QueueCPULimit,
		MemoryMB: rs.QueueMemoryMB, MemoryLimitMB: rs.QueueMemoryLimitMB})
}

// replicaResources are the limits of replica r's agent container.
func (p *plan) replicaResources(r runtime.Replica) container.Resources {
	if r.Role == "queue" {
		return p.queue
	}
	return p.resources
}

// startGroup runs the init containers once (they prepare the volumes the
// replicas share), then every replica's agent and sidecars, and waits for
// every agent's health check. On a failure, the caller removes the
// revision's containers.
func (d *Driver) startGroup(ctx context.Context, s runtime.Spec, image string, p *plan, log io.Writer) ([]*member, error) {
	dep, rev := s.DeploymentID, s.RevisionID
	replicas := s.Scale.Replicas()
	names := make([]string, len(replicas))
	for i, r := range replicas {
		names[i] = r.Name + " (" + r.Role + ")"
	}
	fmt.Fprintf(log, "starting %d agent containers: %s\n", len(replicas), strings.Join(names, ", "))
	if err := d.runInits(ctx, s, p, agentName(dep, rev)+"-init-", log); err != nil {
		return nil, err
	}
	members := make([]*member, len(replicas))
	for i, r := range replicas {
		if err := d.ensureVolume(ctx, replicaVolume(dep, r), dep, ""); err != nil {
			return nil, fmt.Errorf("replica %s: %w", r.Name, err)
		}
		id, err := d.startAgent(ctx, s, image, p, r, log)
		if err != nil {
			return nil, fmt.Errorf("replica %s: %w", r.Name, err)
		}
		members[i] = &member{name: r.Name, role: r.Role, container: id}
	}
	hctx, cancel := context.WithTimeout(ctx, d.healthTimeout())
	defer cancel()
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ep, err := d.waitHealthy(hctx, m.container, dep, true)
			if err != nil {
				errs[i] = fmt.Errorf("replica %s: %w", m.name, err)
				return
			}
			m.endpoint, m.up = ep, true // not shared yet
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			if tail := d.logTail(members[i].container); tail != "" {
				fmt.Fprintf(log, "agent output of replica %s:\n%s\n", members[i].name, tail)
			}
			return nil, err
		}
	}
	for _, m := range members {
		fmt.Fprintf(log, "replica %s (role %s) is serving on %s\n", m.name, m.role, m.endpoint)
	}
	return members, nil
}

// adoptGroup takes over a scaled revision's running group (after a
// restart of Slipway): every replica of the plan, found by its label,
// runs in the role the plan gives it and answers GET /ok. Otherwise
// nothing is adopted and Deploy starts the group afresh.
func (d *Driver) adoptGroup(ctx context.Context, s runtime.Spec, agents []container.Summary) (string, bool) {
	byName := map[string]container.Summary{}
	for _, c := range agents {
		if c.Labels[LabelRevision] == s.RevisionID && c.Labels[LabelReplica] != "" {
			byName[c.Labels[LabelReplica]] = c
		}
	}
	want := s.Scale.Replicas()
	if len(byName) != len(want) {
		return "", false
	}
	members := make([]*member, 0, len(want))
	for _, r := range want {
		c, ok := byName[r.Name]
		if !ok || c.State != container.StateRunning || c.Labels[LabelReplicaRole] != r.Role {
			return "", false
		}
		ep, err := d.endpointOf(ctx, c.ID, s.DeploymentID, false)
		if err != nil || !healthy(ep) {
			return "", false
		}
		members = append(members, &member{name: r.Name, role: r.Role, container: c.ID, endpoint: ep, up: true})
	}
	d.set(s.DeploymentID, groupServing(s.RevisionID, members))
	return members[0].endpoint, true
}

// revisionOf names the revision of an agent container for the deploy
// log, and its replica when it has one.
func revisionOf(c container.Summary) string {
	if r := c.Labels[LabelReplica]; r != "" {
		return c.Labels[LabelRevision] + " replica " + r
	}
	return c.Labels[LabelRevision]
}

// groupServing is what serves for a group: its first API replica stands
// for it where the driver names one container (Endpoint, usage).
func groupServing(rev string, members []*member) serving {
	return serving{rev: rev, container: members[0].container, endpoint: members[0].endpoint, members: members}
}

// restartPrevious brings the previous revision back after a failed
// handover: one agent as before, or every container of its group.
func (d *Driver) restartPrevious(prev []container.Summary) {
	var group []container.Summary
	for _, c := range prev {
		if c.Labels[LabelReplica] == "" {
			d.restart(c)
		} else {
			group = append(group, c)
		}
	}
	if len(group) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.healthTimeout())
	defer cancel()
	sort.Slice(group, func(i, j int) bool { return replicaLess(group[i].Labels, group[j].Labels) })
	dep, rev := group[0].Labels[LabelDeployment], group[0].Labels[LabelRevision]
	members := make([]*member, len(group))
	var wg sync.WaitGroup
	for i, c := range group {
		m := &member{name: c.Labels[LabelReplica], role: c.Labels[LabelReplicaRole], container: c.ID}
		members[i] = m
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ep, ok := d.startAgain(ctx, c.ID, dep); ok {
				m.endpoint, m.up = ep, true // not shared yet
			}
		}()
	}
	wg.Wait()
	if members[0].endpoint == "" {
		return
	}
	d.set(dep, groupServing(rev, members))
}

// replicaLess orders replicas as runtime.Scale.Replicas does: API
// replicas first, each kind by number.
func replicaLess(a, b map[string]string) bool {
	ka, kb := a[LabelReplicaRole] == "queue", b[LabelReplicaRole] == "queue"
	if ka != kb {
		return kb
	}
	na, _ := strconv.Atoi(a[LabelReplica][strings.LastIndexByte(a[LabelReplica], '-')+1:])
	nb, _ := strconv.Atoi(b[LabelReplica][strings.LastIndexByte(b[LabelReplica], '-')+1:])
	return na < nb
}

// checkGroup is CheckHealth of a scaled revision: every member is checked
// and marked up or down (Endpoints); the revision serves while at least
// one API replica answers. A member that exited is its restart policy's
// to bring back (at a new address, which is followed); the watcher
// recreates the whole revision only when no API replica answers.
func (d *Driver) checkGroup(ctx context.Context, dep string, s serving, start bool) error {
	serving, gone := 0, 0
	var down []string
	for _, m := range s.members {
		ok, missing := d.checkMember(ctx, dep, m, start)
		switch {
		case missing:
			gone++
			down = append(down, m.name)
		case !ok:
			down = append(down, m.name)
		case m.api():
			serving++
		}
	}
	if gone == len(s.members) {
		d.mu.Lock()
		if cur, ok := d.deps[dep]; ok && cur.container == s.container {
			delete(d.deps, dep)
		}
		d.mu.Unlock()
		return errors.New("the agent containers are gone (removed outside Slipway)")
	}
	if serving == 0 {
		return fmt.Errorf("no API replica answers GET /ok (down: %s)", strings.Join(down, ", "))
	}
	return nil
}

// checkMember checks one member and records its address and whether it
// answers. With start, a container that was stopped (outside Slipway:
// the restart policy does not undo that) is started again, as Refresh
// does for one agent.
func (d *Driver) checkMember(ctx context.Context, dep string, m *member, start bool) (ok, gone bool) {
	ep, err := d.endpointOf(ctx, m.container, dep, false)
	if cerrdefs.IsNotFound(err) {
		d.markMember(m, "", false)
		return false, true
	}
	if err != nil && start {
		res, ierr := d.Client.ContainerInspect(ctx, m.container, client.ContainerInspectOptions{})
		if ierr == nil && res.Container.State != nil && !res.Container.State.Running && !res.Container.State.Restarting {
			d.Log.Warn().Str("deployment_id", dep).Str("replica", m.name).Msg("a replica's agent is stopped; starting it again")
			if _, serr := d.Client.ContainerStart(ctx, m.container, client.ContainerStartOptions{}); serr == nil {
				ep, err = d.waitHealthy(ctx, m.container, dep, false)
			}
		}
	}
	ok = err == nil && healthy(ep)
	d.markMember(m, ep, ok)
	return ok, false
}

func (d *Driver) markMember(m *member, ep string, up bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if up {
		m.endpoint = ep
	}
	m.up = up
}

// memberOf is the member of dep's serving group whose container is id.
// Under d.mu.
func (s serving) memberOf(id string) *member {
	for _, m := range s.members {
		if m.container == id {
			return m
		}
	}
	return nil
}

// Scales: the docker runtime runs scaled revisions (runtime.Scaler).
func (d *Driver) Scales() bool { return true }

// Endpoints lists the API replicas of dep that answered their last health
// check (runtime.Balancer); the one agent's endpoint for an unscaled
// deployment. A replica leaves the list when its container dies or a
// check fails, and comes back once it answers GET /ok again.
func (d *Driver) Endpoints(dep string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.deps[dep]
	if !ok {
		return nil
	}
	if s.members == nil {
		return []string{s.endpoint}
	}
	var out []string
	for _, m := range s.members {
		if m.api() && m.up {
			out = append(out, m.endpoint)
		}
	}
	return out
}

// ReplicaEndpoints lists every agent of a scaled revision, up or not
// (runtime.ReplicaLister); nil for an unscaled one.
func (d *Driver) ReplicaEndpoints(dep string) []runtime.ReplicaEndpoint {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.deps[dep]
	if !ok || s.members == nil {
		return nil
	}
	out := make([]runtime.ReplicaEndpoint, 0, len(s.members))
	for _, m := range s.members {
		if m.endpoint != "" {
			out = append(out, runtime.ReplicaEndpoint{Name: m.name, URL: m.endpoint})
		}
	}
	return out
}
