package swarm

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"slipway/runtime"
	"slipway/runtime/docker"
)

// A scaled revision (runtime.Scale) runs as two services over the
// deployment's PostgreSQL database and Redis prefix: the API service
// (slipway-<deployment>, min_scale replicas, role api, or role all when
// there are no queue workers) and the queue service
// (slipway-<deployment>-queue, queue_min_scale replicas, role queue).
// Every task has a worker id of its own (role, slot and task id, from
// Swarm's templates), which names it in run leases and in a run's
// metadata.worker. Both roll out start-first (their state is in
// PostgreSQL, see updateOrder). The proxy spreads requests over the API
// tasks that answer GET /ok now, each at its node's address and the port
// the node published for it (Endpoints).

func queueServiceName(dep string) string { return serviceName(dep) + "-queue" }

// Scales: the swarm runtime runs scaled revisions (runtime.Scaler).
func (d *Driver) Scales() bool { return true }

// withRole makes spec the service of one role of a scaled revision: its
// replica env (role, its share of the database connections) and a worker
// id per task. Slots are 1-based; the task id tells apart the two tasks
// of one slot that run side by side during a start-first update.
func withRole(spec *swarm.ServiceSpec, s runtime.Spec, role string, n int) {
	prefix := "api"
	if role == "queue" {
		prefix = "queue"
	}
	var env map[string]string
	for _, r := range s.Scale.Replicas() {
		if r.Role == role {
			env = r.Env
			break
		}
	}
	add := make([]string, 0, len(env))
	for k, v := range env {
		if k == "SLIPWAY_AGENT_WORKER_ID" {
			v = prefix + "-{{.Task.Slot}}-{{.Task.ID}}"
		}
		add = append(add, k+"="+v)
	}
	sort.Strings(add)
	cs := spec.TaskTemplate.ContainerSpec
	cs.Env = runtime.Settle(cs.Env, add)
	u := uint64(n)
	spec.Mode.Replicated.Replicas = &u
}

// apiRole is the role of a scaled revision's API replicas: they execute
// runs too unless there are queue workers.
func apiRole(s runtime.Spec) string {
	if s.Scale.Queue > 0 {
		return "api"
	}
	return "all"
}

// queueSpec is the queue service's spec: the API service's (its spec as
// deployed, so that an adopted revision gets the same), as role queue.
func queueSpec(api swarm.ServiceSpec, s runtime.Spec) swarm.ServiceSpec {
	q := api
	cs := *api.TaskTemplate.ContainerSpec
	cs.Env = slices.Clone(cs.Env)
	q.TaskTemplate.ContainerSpec = &cs
	q.Mode = swarm.ServiceMode{Replicated: &swarm.ReplicatedService{}}
	q.Name = queueServiceName(s.DeploymentID)
	withRole(&q, s, "queue", s.Scale.Queue)
	return q
}

// settleScale follows the API service's deploy: for a scaled revision it
// waits for all its API tasks, deploys the queue workers and starts
// spreading requests; otherwise a queue service of an earlier revision
// goes.
func (d *Driver) settleScale(ctx context.Context, s runtime.Spec, api swarm.ServiceSpec, apiID string, log io.Writer) error {
	dep := s.DeploymentID
	if !s.Scale.Scaled() {
		d.setPool(dep, false)
		d.stopAutoscale(dep)
		return d.removeQueue(ctx, dep, true)
	}
	hctx, cancel := context.WithTimeout(ctx, d.healthTimeout())
	err := d.waitTasks(hctx, apiID, s.RevisionID, max(s.Scale.API, 1))
	cancel()
	if err != nil {
		return fmt.Errorf("API replicas: %w", err)
	}
	if s.Scale.Queue > 0 {
		if err := d.deployQueue(ctx, s, queueSpec(api, s), log); err != nil {
			return err
		}
	} else if err := d.removeQueue(ctx, dep, true); err != nil {
		return err
	}
	d.setPool(dep, true)
	fmt.Fprintf(log, "%s of revision %s are serving; requests are spread over the API replicas\n", scaleNote(s), s.RevisionID)
	d.startAutoscale(s)
	if rs := s.ResourceSpec; s.Scale.Queue > 0 && rs != nil && rs.QueueMaxScale != nil && *rs.QueueMaxScale > s.Scale.Queue {
		fmt.Fprintf(log, "queue workers autoscale between %d and %d from the pending runs\n", s.Scale.Queue, *rs.QueueMaxScale)
	}
	return nil
}

// rollback asks Swarm to put the service's previous spec back.
func (d *Driver) rollback(svc swarm.Service, log io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cur, err := d.Client.ServiceInspect(ctx, svc.ID, client.ServiceInspectOptions{})
	if err == nil {
		_, err = d.Client.ServiceUpdate(ctx, svc.ID, client.ServiceUpdateOptions{Version: cur.Service.Version,
			Spec: cur.Service.Spec, Rollback: "previous"})
	}
	if err != nil {
		fmt.Fprintf(log, "roll the service back: %v\n", err)
		return
	}
	fmt.Fprintf(log, "rolling service %s back to its previous revision\n", svc.Spec.Name)
}

// deployQueue creates or updates the queue service to the revision and
// waits until all its workers answer GET /ok.
func (d *Driver) deployQueue(ctx context.Context, s runtime.Spec, spec swarm.ServiceSpec, log io.Writer) error {
	res, err := d.Client.ServiceInspect(ctx, spec.Name, client.ServiceInspectOptions{})
	var id string
	switch {
	case cerrdefs.IsNotFound(err):
		fmt.Fprintf(log, "creating service %s (%d queue workers)\n", spec.Name, s.Scale.Queue)
		cr, err := d.Client.ServiceCreate(ctx, client.ServiceCreateOptions{Spec: spec, EncodedRegistryAuth: d.RegistryAuth})
		if err != nil {
			return fmt.Errorf("create the queue service: %w", err)
		}
		id = cr.ID
	case err != nil:
		return fmt.Errorf("inspect the queue service: %w", err)
	case !d.Docker.Ours(res.Service.Spec.Labels, true):
		return fmt.Errorf("service %s belongs to another Slipway install", spec.Name)
	case res.Service.Spec.Labels[docker.LabelRevision] == s.RevisionID:
		id = res.Service.ID // adopted: it runs this revision already
	default:
		if _, err := d.update(ctx, res.Service, spec, s.RevisionID, log); err != nil {
			return fmt.Errorf("queue workers: %w", err)
		}
		id = res.Service.ID
	}
	hctx, cancel := context.WithTimeout(ctx, d.healthTimeout())
	defer cancel()
	if err := d.waitTasks(hctx, id, s.RevisionID, s.Scale.Queue); err != nil {
		if tail := d.logTail(id); tail != "" {
			fmt.Fprintf(log, "queue worker output:\n%s\n", tail)
		}
		return fmt.Errorf("queue workers: %w", err)
	}
	fmt.Fprintf(log, "%d queue workers (role queue) of revision %s are serving\n", s.Scale.Queue, s.RevisionID)
	return nil
}

// removeQueue removes the deployment's queue service, if this install's.
func (d *Driver) removeQueue(ctx context.Context, dep string, claimed bool) error {
	res, err := d.Client.ServiceInspect(ctx, queueServiceName(dep), client.ServiceInspectOptions{})
	switch {
	case cerrdefs.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("inspect the queue service: %w", err)
	case !d.Docker.Ours(res.Service.Spec.Labels, claimed):
		return nil
	}
	if _, err := d.Client.ServiceRemove(ctx, res.Service.ID, client.ServiceRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("remove the queue service: %w", err)
	}
	return nil
}

// waitTasks waits until n tasks of revision rev of the service run and
// answer GET /ok.
func (d *Driver) waitTasks(ctx context.Context, svcID, rev string, n int) error {
	got := 0
	for {
		eps, _ := d.taskEndpoints(ctx, svcID, rev)
		got = 0
		for _, e := range eps {
			if e.healthy {
				got++
			}
		}
		if got >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d tasks answered GET /ok within %v", got, n, d.healthTimeout())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// replicaTask is one running task of a service, as Slipway reaches it.
type replicaTask struct {
	name    string // api-<slot> or queue-<slot>
	url     string
	healthy bool
}

// taskEndpoints lists the running tasks of revision rev of the service
// (by id or name), each probed with GET /ok at once; an error when the
// manager did not list them.
func (d *Driver) taskEndpoints(ctx context.Context, svc, rev string) ([]replicaTask, error) {
	res, err := d.Client.TaskList(ctx, client.TaskListOptions{Filters: client.Filters{}.Add("service", svc).Add("desired-state", "running")})
	if err != nil {
		return nil, fmt.Errorf("list the tasks of %s: %w", svc, err)
	}
	var out []replicaTask
	for _, t := range res.Items {
		cs := t.Spec.ContainerSpec
		if t.Status.State != swarm.TaskStateRunning || cs == nil || cs.Labels[docker.LabelRevision] != rev {
			continue
		}
		u := d.taskURL(ctx, t)
		if u == "" {
			continue
		}
		prefix := "api"
		if envValue(cs, "SLIPWAY_AGENT_ROLE") == "queue" {
			prefix = "queue"
		}
		out = append(out, replicaTask{name: prefix + "-" + strconv.Itoa(t.Slot), url: u})
	}
	var wg sync.WaitGroup
	for i := range out {
		wg.Add(1)
		go func() { defer wg.Done(); out[i].healthy = healthy(out[i].url) }()
	}
	wg.Wait()
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// taskURL is where Slipway reaches a running task: the port its node
// published for the agent, at the node's address (PublishHost when the
// node is this host), with the agent's token as the URL's password; ""
// when the task publishes none.
func (d *Driver) taskURL(ctx context.Context, t swarm.Task) string {
	for _, pc := range t.Status.PortStatus.Ports {
		if pc.TargetPort != agentPort || pc.PublishedPort == 0 {
			continue
		}
		host := d.nodeHost(ctx, t.NodeID)
		hp := net.JoinHostPort(host, strconv.Itoa(int(pc.PublishedPort)))
		if token := envValue(t.Spec.ContainerSpec, "SLIPWAY_AGENT_TOKEN"); token != "" {
			return "http://agent:" + token + "@" + hp
		}
		return "http://" + hp
	}
	return ""
}

// nodeHost is the address Slipway reaches a node's published ports at:
// the node's address as the manager knows it (Node.Status.Addr), or
// PublishHost when that is an address of this host (a one-node swarm, or
// a node whose address is 0.0.0.0 or loopback).
func (d *Driver) nodeHost(ctx context.Context, nodeID string) string {
	local := cmp.Or(d.PublishHost, "127.0.0.1")
	d.mu.Lock()
	addr, ok := d.nodeAddrs[nodeID]
	d.mu.Unlock()
	if !ok {
		res, err := d.Client.NodeInspect(ctx, nodeID, client.NodeInspectOptions{})
		if err != nil {
			return local
		}
		addr = res.Node.Status.Addr
		d.mu.Lock()
		if d.nodeAddrs == nil {
			d.nodeAddrs = map[string]string{}
		}
		d.nodeAddrs[nodeID] = addr
		d.mu.Unlock()
	}
	a, err := netip.ParseAddr(addr)
	if err != nil || a.IsUnspecified() || a.IsLoopback() || isLocalAddr(a) {
		return local
	}
	return a.String()
}

// isLocalAddr says whether a is an address of one of this host's interfaces.
func isLocalAddr(a netip.Addr) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, ia := range addrs {
		if p, err := netip.ParsePrefix(ia.String()); err == nil && p.Addr().Unmap() == a.Unmap() {
			return true
		}
	}
	return false
}

// pool is the API tasks a scaled deployment's requests are spread over,
// refreshed at most once a second and never on the request's path.
type pool struct {
	at         time.Time
	eps        []string
	refreshing bool
}

const poolRefresh = time.Second

// Endpoints lists the API tasks of dep's serving revision that answered
// GET /ok within about a second (runtime.Balancer); nil for an unscaled
// deployment, which the proxy reaches at Endpoint.
func (d *Driver) Endpoints(dep string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.pools[dep]
	if !ok {
		return nil
	}
	if time.Since(p.at) > poolRefresh && !p.refreshing {
		p.refreshing = true
		go d.refreshPool(dep)
	}
	return slices.Clone(p.eps)
}

func (d *Driver) refreshPool(dep string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d.mu.Lock()
	rev := d.deps[dep].rev
	d.mu.Unlock()
	tasks, err := d.taskEndpoints(ctx, serviceName(dep), rev)
	var eps []string
	for _, t := range tasks {
		if t.healthy {
			eps = append(eps, t.url)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.pools[dep]
	if !ok {
		return
	}
	p.at, p.refreshing = time.Now(), false
	if err != nil {
		// The manager did not answer (busy, or electing a leader after
		// losing a node): the replicas it listed last are still the
		// best guess; an empty list would send every request to one.
		d.Log.Debug().Err(err).Str("deployment_id", dep).Msg("refresh the API replicas")
		return
	}
	p.eps = eps
}

// setPool starts (scaled) or ends (not) spreading dep's requests.
func (d *Driver) setPool(dep string, scaled bool) {
	d.mu.Lock()
	if d.pools == nil {
		d.pools = map[string]*pool{}
	}
	if !scaled {
		delete(d.pools, dep)
		d.mu.Unlock()
		return
	}
	if _, ok := d.pools[dep]; !ok {
		d.pools[dep] = &pool{refreshing: true}
	}
	d.mu.Unlock()
	d.refreshPool(dep)
}

// ReplicaEndpoints lists every running task of dep's scaled revision, API
// and queue, for the metrics relay (runtime.ReplicaLister).
func (d *Driver) ReplicaEndpoints(dep string) []runtime.ReplicaEndpoint {
	d.mu.Lock()
	_, scaled := d.pools[dep]
	rev := d.deps[dep].rev
	d.mu.Unlock()
	if !scaled {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out []runtime.ReplicaEndpoint
	for _, svc := range []string{serviceName(dep), queueServiceName(dep)} {
		tasks, _ := d.taskEndpoints(ctx, svc, rev)
		for _, t := range tasks {
			out = append(out, runtime.ReplicaEndpoint{Name: t.name, URL: t.url})
		}
	}
	return out
}

// scaleNote is the deploy log's line for a scaled revision.
func scaleNote(s runtime.Spec) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d API replicas", max(s.Scale.API, 1))
	if s.Scale.Queue > 0 {
		fmt.Fprintf(&b, " (service %s) and %d queue workers (service %s)", serviceName(s.DeploymentID), s.Scale.Queue, queueServiceName(s.DeploymentID))
	}
	return b.String()
}

// LiveWorkers lists the worker ids of dep's tasks that may still hold
// connections (runtime.WorkerLister): api-<slot>-<task id> and
// queue-<slot>-<task id>, as withRole names them. See liveWorkerIDs for
// which tasks count. Unscaled deployments have no worker ids: ok is false.
func (d *Driver) LiveWorkers(ctx context.Context, dep string) ([]string, bool) {
	d.mu.Lock()
	_, scaled := d.pools[dep]
	d.mu.Unlock()
	if !scaled {
		return nil, false
	}
	nodes, err := d.Client.NodeList(ctx, client.NodeListOptions{})
	if err != nil {
		return nil, false
	}
	ready := map[string]bool{}
	for _, n := range nodes.Items {
		ready[n.ID] = n.Status.State == swarm.NodeStateReady
	}
	var tasks []swarm.Task
	for _, svc := range []string{serviceName(dep), queueServiceName(dep)} {
		res, err := d.Client.TaskList(ctx, client.TaskListOptions{Filters: client.Filters{}.Add("service", svc)})
		if err != nil {
			if cerrdefs.IsNotFound(err) {
				continue // no queue service
			}
			return nil, false
		}
		tasks = append(tasks, res.Items...)
	}
	return liveWorkerIDs(tasks, ready), true
}

// liveWorkerIDs names the tasks that are, or may still be, running: those
// Swarm wants running, and those it has told to shut down that still run
// on a node that is up. The second kind are replicas draining after a
// scale-down or an update, for up to their stop grace period; their
// in-flight requests still use their connections. A task on a lost node
// keeps the last state it reported (running), so it counts only while
// Swarm wants it: once Swarm replaces it, it drops out, and its
// connections are ended.
func liveWorkerIDs(tasks []swarm.Task, nodeReady map[string]bool) []string {
	var out []string
	for _, t := range tasks {
		draining := t.Status.State == swarm.TaskStateRunning && nodeReady[t.NodeID]
		if t.DesiredState != swarm.TaskStateRunning && !draining {
			continue
		}
		prefix := "api"
		if envValue(t.Spec.ContainerSpec, "SLIPWAY_AGENT_ROLE") == "queue" {
			prefix = "queue"
		}
		out = append(out, prefix+"-"+strconv.Itoa(t.Slot)+"-"+t.ID)
	}
	return out
}
