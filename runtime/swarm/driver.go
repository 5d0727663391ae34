// Package swarm runs deployments as Docker Swarm services. It reuses the
// docker runtime (runtime/docker) for everything a revision means before
// it runs: the image build, the spec translation, the hardening and the
// labels. What it adds: images reach the swarm's nodes through a registry
// and are referenced by digest; a deployment is a replicated service on
// an overlay network of its own, rolled out start-first behind the
// agent's health check with Swarm's automatic rollback; secrets are Swarm
// secrets.
//
// Names of what it creates, all labelled as the docker runtime labels
// (install id included):
//
//	network  slipway-<deployment>          overlay, attachable
//	volume   slipway-<deployment>-data     the agent database (on the node)
//	service  slipway-<deployment>          one agent per replica (API replicas)
//	service  slipway-<deployment>-queue    queue workers of a scaled revision
//	secret   slipway-<hash>                one per revision and secret
//	image    <registry>/slipway/<deployment>:<revision>
package swarm

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"
	"github.com/rs/zerolog"

	"slipway/runtime"
	"slipway/runtime/docker"
)

// Engine is the part of the Docker API the driver uses: the docker
// runtime's, and a swarm manager's.
type Engine interface {
	docker.Engine
	client.ServiceAPIClient
	client.TaskAPIClient
	client.SecretAPIClient
	client.SwarmAPIClient
	client.NodeAPIClient
}

// Driver is the swarm runtime.
type Driver struct {
	Client Engine
	// Docker builds the images and translates specs; its Client is the
	// same engine (the manager Slipway talks to).
	Docker *docker.Driver
	// Registry is where images go for the swarm's nodes to pull them
	// (host[:port], SLIPWAY_REGISTRY); RegistryAuth the encoded
	// credentials for it ("" for none; see EncodeAuth).
	Registry     string
	RegistryAuth string
	// PublishHost is the address a node's published ports are reached at
	// when the node is this host (default 127.0.0.1); other nodes are
	// reached at their own addresses (nodeHost, scale.go).
	PublishHost string
	Log         zerolog.Logger
	// HealthTimeout bounds how long a new revision may take to become
	// healthy; StopGrace is how long an agent gets after SIGTERM.
	HealthTimeout, StopGrace time.Duration
	// Monitor is how long Swarm watches a new task for failure before it
	// counts the update as done (UpdateConfig.Monitor).
	Monitor time.Duration

	mu   sync.Mutex
	deps map[string]serving
	// pools: the API tasks of scaled deployments (scale.go); nodeAddrs:
	// the swarm nodes' addresses by id.
	pools     map[string]*pool
	nodeAddrs map[string]string

	// AutoscaleInterval and ScaleDownAfter time the autoscaler
	// (autoscale.go); APIRequestsPerReplica is its target for the API
	// replicas (autoscale_api.go). Zero: the defaults.
	AutoscaleInterval, ScaleDownAfter time.Duration
	APIRequestsPerReplica             float64
	scalers                           map[string]context.CancelFunc
	events                            runtime.Output
	metricsOnce                       sync.Once
	autoMetrics                       *autoscaleMetrics
}

type serving struct {
	rev, endpoint string
}

func (d *Driver) Name() string { return "swarm" }

// CheckSwarm reports whether the engine is a manager of an active swarm.
func CheckSwarm(ctx context.Context, c Engine) error {
	info, err := c.Info(ctx, client.InfoOptions{})
	if err != nil {
		return fmt.Errorf("docker info: %w", err)
	}
	sw := info.Info.Swarm
	if sw.LocalNodeState != swarm.LocalNodeStateActive {
		return fmt.Errorf("the engine is not part of an active swarm (state %q; run docker swarm init)", sw.LocalNodeState)
	}
	if !sw.ControlAvailable {
		return errors.New("the engine is a swarm worker; point DOCKER_HOST at a manager")
	}
	return nil
}

func (d *Driver) healthTimeout() time.Duration {
	return cmp.Or(d.HealthTimeout, runtime.DefaultHealthTimeout)
}
func (d *Driver) grace() time.Duration   { return cmp.Or(d.StopGrace, runtime.DefaultStopGrace) }
func (d *Driver) monitor() time.Duration { return cmp.Or(d.Monitor, 5*time.Second) }

// Build builds as the docker runtime does, then pushes the image to the
// registry and returns its reference by digest: every node then runs
// exactly the image built, whatever a tag points at later.
func (d *Driver) Build(ctx context.Context, s runtime.Spec, log io.Writer) (string, error) {
	local, err := d.Docker.Build(ctx, s, log)
	if err != nil {
		return "", err
	}
	if s.Source != "internal_source" {
		// The nodes pull the given image themselves; by digest when the
		// engine knows it.
		return d.digestOf(ctx, local, ""), nil
	}
	return d.push(ctx, local, s.DeploymentID, s.RevisionID, log)
}

// Deploy creates the deployment's service, or updates it to this
// revision: Swarm replaces the task (start-first or stop-first, see
// updateOrder), waits for its health check, and rolls back on failure.
func (d *Driver) Deploy(ctx context.Context, s runtime.Spec, image string, log io.Writer) (string, error) {
	plain := s
	plain.Env, plain.SecretReferences = nil, nil // Swarm secrets (secrets.go)
	p, err := docker.PlanAgent(plain, "", d.Docker.DefaultMemoryMB)
	if err != nil {
		return "", err
	}
	if err := checkPlan(p); err != nil {
		return "", err
	}
	// The autoscaler of the revision before must not change the queue
	// service while it is updated; the new revision starts its own.
	d.stopAutoscale(s.DeploymentID)
	cur, found, err := d.service(ctx, s.DeploymentID)
	if err != nil {
		return "", err
	}
	if found && cur.Spec.Labels[docker.LabelRevision] == s.RevisionID {
		// The service runs this revision already (adopted after a restart
		// of Slipway, or a repeated call): Swarm keeps its task running,
		// so wait for it rather than update to the same spec.
		hctx, cancel := context.WithTimeout(ctx, d.healthTimeout())
		defer cancel()
		ep, err := d.waitServing(hctx, cur.ID, false)
		if err != nil {
			return "", err
		}
		d.set(s.DeploymentID, serving{rev: s.RevisionID, endpoint: ep})
		if err := d.settleScale(ctx, s, cur.Spec, cur.ID, log); err != nil {
			return "", err
		}
		fmt.Fprintf(log, "revision %s is already serving on the swarm\n", s.RevisionID)
		return ep, nil
	}
	if err := d.ensureNetwork(ctx, s.DeploymentID, s.DeploymentName); err != nil {
		return "", err
	}
	refs, err := d.secrets(ctx, s, log)
	if err != nil {
		return "", err
	}
	t := taskSpec{image: image, slipwayImage: d.isSlipwayImage(ctx, image), secrets: refs,
		healthTimeout: d.healthTimeout(), stopGrace: d.grace(), monitor: d.monitor()}
	if found {
		// The token stays the deployment's across revisions: Slipway
		// holds one endpoint while both revisions run.
		t.token = envValue(cur.Spec.TaskTemplate.ContainerSpec, "SLIPWAY_AGENT_TOKEN")
	}
	if t.token == "" {
		t.token = newToken()
	}
	spec := d.serviceSpec(s, p, t)
	if s.Scale.Scaled() {
		withRole(&spec, s, apiRole(s), max(s.Scale.API, 1))
	}
	var ep string
	if found {
		if spec.UpdateConfig.Order == swarm.UpdateOrderStopFirst && d.Docker.Gate != nil {
			resume := d.Docker.Gate.Pause(s.DeploymentID)
			defer resume()
		}
		ep, err = d.update(ctx, cur, spec, s.RevisionID, log)
	} else {
		ep, err = d.create(ctx, spec, s.RevisionID, log)
	}
	if err != nil {
		return "", err
	}
	d.set(s.DeploymentID, serving{rev: s.RevisionID, endpoint: ep})
	svc, _, err := d.service(ctx, s.DeploymentID)
	if err != nil {
		return "", err
	}
	if err := d.settleScale(ctx, s, spec, svc.ID, log); err != nil {
		if found {
			// The API service runs the new revision; its queue workers do
			// not: put the previous revision back whole.
			d.rollback(svc, log)
		}
		return "", err
	}
	fmt.Fprintf(log, "revision %s is serving on the swarm (service %s)\n", s.RevisionID, spec.Name)
	d.collectSecrets(ctx, s.DeploymentID, true)
	return ep, nil
}

func newToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func envValue(cs *swarm.ContainerSpec, name string) string {
	if cs == nil {
		return ""
	}
	for _, kv := range cs.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// service finds the deployment's service, if this install has one.
func (d *Driver) service(ctx context.Context, dep string) (swarm.Service, bool, error) {
	res, err := d.Client.ServiceInspect(ctx, serviceName(dep), client.ServiceInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return swarm.Service{}, false, nil
	}
	if err != nil {
		return swarm.Service{}, false, fmt.Errorf("inspect service: %w", err)
	}
	if !d.Docker.Ours(res.Service.Spec.Labels, true) {
		return swarm.Service{}, false, fmt.Errorf("service %s belongs to another Slipway install", serviceName(dep))
	}
	return res.Service, true, nil
}

// create starts the deployment's first service and waits until it serves.
func (d *Driver) create(ctx context.Context, spec swarm.ServiceSpec, rev string, log io.Writer) (string, error) {
	fmt.Fprintf(log, "creating service %s\n", spec.Name)
	res, err := d.Client.ServiceCreate(ctx, client.ServiceCreateOptions{Spec: spec, EncodedRegistryAuth: d.RegistryAuth})
	if err != nil {
		return "", fmt.Errorf("create service: %w", err)
	}
	hctx, cancel := context.WithTimeout(ctx, d.healthTimeout())
	defer cancel()
	ep, err := d.waitServing(hctx, res.ID, true)
	if err != nil {
		if tail := d.logTail(res.ID); tail != "" {
			fmt.Fprintf(log, "agent output:\n%s\n", tail)
		}
		// Nothing served before: the service goes, so that Swarm stops
		// restarting a revision that cannot start.
		if _, rerr := d.Client.ServiceRemove(context.Background(), res.ID, client.ServiceRemoveOptions{}); rerr != nil && !cerrdefs.IsNotFound(rerr) {
			d.Log.Warn().Err(rerr).Msg("remove the failed service")
		}
		return "", err
	}
	return ep, nil
}

// update rolls the service over to a new revision and follows Swarm's
// update: completed, or rolled back to the revision before.
func (d *Driver) update(ctx context.Context, cur swarm.Service, spec swarm.ServiceSpec, rev string, log io.Writer) (string, error) {
	prev := cur.Spec.Labels[docker.LabelRevision]
	// The API service's serving task is the deployment's endpoint; a
	// queue service's is not.
	primary := cur.Spec.Name == serviceName(cur.Spec.Labels[docker.LabelDeployment])
	how := "start-first: the new agent starts beside the old one"
	if spec.UpdateConfig.Order == swarm.UpdateOrderStopFirst {
		how = "stop-first: the agent database on the data volume admits one agent at a time"
	}
	fmt.Fprintf(log, "updating service %s from revision %s (%s; Swarm rolls back if the new agent fails its health check)\n", spec.Name, prev, how)
	if _, err := d.Client.ServiceUpdate(ctx, cur.ID, client.ServiceUpdateOptions{Version: cur.Version, Spec: spec,
		EncodedRegistryAuth: d.RegistryAuth}); err != nil {
		return "", fmt.Errorf("update service: %w", err)
	}
	// The agent gets its health timeout; Swarm then watches the task for
	// Monitor, and rolls back within as long again.
	deadline := d.healthTimeout() + 3*d.monitor() + 30*time.Second
	hctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	for {
		res, err := d.Client.ServiceInspect(hctx, cur.ID, client.ServiceInspectOptions{})
		if err != nil {
			return "", fmt.Errorf("follow the service update: %w", err)
		}
		us := res.Service.UpdateStatus
		state := swarm.UpdateState("")
		msg := ""
		if us != nil {
			state, msg = us.State, us.Message
		}
		if state == swarm.UpdateStateUpdating && primary && res.Service.Spec.Labels[docker.LabelRevision] == rev {
			// Start-first: once the new task serves, Slipway sends requests
			// to it, before Swarm stops the old one.
			if ep, ok := d.serves(hctx, res.Service); ok {
				d.set(cur.Spec.Labels[docker.LabelDeployment], serving{rev: rev, endpoint: ep})
			}
		}
		switch state {
		case swarm.UpdateStateCompleted:
			if res.Service.Spec.Labels[docker.LabelRevision] == rev {
				if ep, ok := d.serves(hctx, res.Service); ok {
					return ep, nil
				}
			}
		case swarm.UpdateStateRollbackStarted:
			// Swarm is putting the previous revision back.
		case swarm.UpdateStateRollbackCompleted:
			if tail := d.logTail(cur.ID); tail != "" {
				fmt.Fprintf(log, "agent output:\n%s\n", tail)
			}
			fmt.Fprintf(log, "Swarm rolled the service back to revision %s: %s\n", prev, msg)
			if ep, ok := d.serves(ctx, res.Service); ok && primary {
				d.set(cur.Spec.Labels[docker.LabelDeployment], serving{rev: prev, endpoint: ep})
			}
			return "", fmt.Errorf("the new agent failed on the swarm and Swarm rolled back to revision %s: %s", prev, msg)
		case swarm.UpdateStatePaused, swarm.UpdateStateRollbackPaused:
			return "", fmt.Errorf("the service update is %s: %s", state, msg)
		}
		select {
		case <-hctx.Done():
			// Swarm still waits for the new task: put the previous one back.
			fmt.Fprintf(log, "revision %s did not become healthy within %v; rolling back to revision %s\n", rev, d.healthTimeout(), prev)
			if cur2, err := d.Client.ServiceInspect(context.Background(), cur.ID, client.ServiceInspectOptions{}); err == nil {
				_, _ = d.Client.ServiceUpdate(context.Background(), cur.ID, client.ServiceUpdateOptions{Version: cur2.Service.Version,
					Spec: cur2.Service.Spec, Rollback: "previous"})
			}
			return "", fmt.Errorf("the service update did not finish within %v (state %q)", deadline, state)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// waitServing waits for a running task of the service's current revision
// and for GET /ok through its published port. For a new service
// (failFast) a task that fails ends the wait with its error; an existing
// one has failed tasks in its history.
func (d *Driver) waitServing(ctx context.Context, id string, failFast bool) (string, error) {
	var last error
	for {
		res, err := d.Client.ServiceInspect(ctx, id, client.ServiceInspectOptions{})
		if err != nil {
			last = err
		} else if ep, ok := d.serves(ctx, res.Service); ok {
			return ep, nil
		} else if terr := d.failedTask(ctx, id); failFast && terr != nil {
			return "", fmt.Errorf("the agent did not become healthy: %w", terr)
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = errors.New("GET /ok did not answer 200")
			}
			return "", fmt.Errorf("health check did not pass within %v: %w", d.healthTimeout(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// failedTask is the error of a task of the service that failed or was
// rejected, if any.
func (d *Driver) failedTask(ctx context.Context, id string) error {
	res, err := d.Client.TaskList(ctx, client.TaskListOptions{Filters: client.Filters{}.Add("service", id)})
	if err != nil {
		return nil
	}
	for _, t := range res.Items {
		switch t.Status.State {
		case swarm.TaskStateFailed, swarm.TaskStateRejected:
			msg := cmp.Or(t.Status.Err, t.Status.Message)
			if t.Status.ContainerStatus != nil && t.Status.ContainerStatus.ExitCode != 0 {
				msg = fmt.Sprintf("%s (exit status %d)", msg, t.Status.ContainerStatus.ExitCode)
			}
			return fmt.Errorf("task %s: %s", t.Status.State, msg)
		}
	}
	return nil
}

// serves returns the endpoint of a running task of the service's current
// revision that answers GET /ok.
func (d *Driver) serves(ctx context.Context, svc swarm.Service) (string, bool) {
	ep := d.taskEndpoint(ctx, svc)
	if ep == "" || !healthy(ep) {
		return "", false
	}
	return ep, true
}

// taskEndpoint is where Slipway reaches the running task of the service's
// current revision: the port its node published for it on PublishHost,
// with the agent's token as the URL's password; "" when none runs.
func (d *Driver) taskEndpoint(ctx context.Context, svc swarm.Service) string {
	res, err := d.Client.TaskList(ctx, client.TaskListOptions{Filters: client.Filters{}.Add("service", svc.ID).Add("desired-state", "running")})
	if err != nil {
		return ""
	}
	rev := svc.Spec.Labels[docker.LabelRevision]
	for _, t := range res.Items {
		cs := t.Spec.ContainerSpec
		if t.Status.State != swarm.TaskStateRunning || cs == nil || cs.Labels[docker.LabelRevision] != rev {
			continue
		}
		if u := d.taskURL(ctx, t); u != "" {
			return u
		}
	}
	return ""
}

// Refresh finds the serving task again after the endpoint stopped
// answering: Swarm replaced a task that failed, and its replacement
// publishes another port (runtime.Refresher).
func (d *Driver) Refresh(dep string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d.mu.Lock()
	s, ok := d.deps[dep]
	d.mu.Unlock()
	if !ok {
		return
	}
	cur, found, err := d.service(ctx, dep)
	if err != nil || !found || cur.Spec.Labels[docker.LabelRevision] != s.rev {
		return
	}
	if ep, ok := d.serves(ctx, cur); ok && ep != s.endpoint {
		d.set(dep, serving{rev: s.rev, endpoint: ep})
		d.Log.Info().Str("deployment_id", dep).Msg("the serving task moved")
	}
}

var healthClient = &http.Client{Timeout: 2 * time.Second}

// healthy asks GET /ok at endpoint, with the token the URL carries.
func healthy(endpoint string) bool {
	req, err := http.NewRequest(http.MethodGet, endpoint+"/ok", nil)
	if err != nil {
		return false
	}
	if u := req.URL.User; u != nil {
		pw, _ := u.Password()
		req.URL.User = nil
		req.Header.Set(runtime.AgentTokenHeader, pw)
	}
	resp, err := healthClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// logTail is the last lines of the service's output, for failure logs.
func (d *Driver) logTail(id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rc, err := d.Client.ServiceLogs(ctx, id, client.ServiceLogsOptions{ShowStdout: true, ShowStderr: true, Tail: "40"})
	if err != nil {
		return ""
	}
	defer rc.Close()
	var out strings.Builder
	// Without a TTY the stream is multiplexed; demultiplex into one.
	_, _ = stdcopy.StdCopy(&out, &out, io.LimitReader(rc, 64<<10))
	return strings.TrimSpace(out.String())
}

func (d *Driver) set(dep string, s serving) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.deps == nil {
		d.deps = map[string]serving{}
	}
	d.deps[dep] = s
}

// Endpoint is where the deployment's service is reached.
func (d *Driver) Endpoint(dep string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.deps[dep]
	return s.endpoint, ok
}

// Stop ends revision rev: when the service still runs it (its first
// deploy failed, or it was superseded), the service goes; a revision the
// service moved on from left nothing but its secrets and emptyDir
// volumes.
func (d *Driver) Stop(ctx context.Context, dep, rev string) error {
	cur, found, err := d.service(ctx, dep)
	if err != nil {
		return err
	}
	if found && cur.Spec.Labels[docker.LabelRevision] == rev {
		d.mu.Lock()
		delete(d.deps, dep)
		delete(d.pools, dep)
		d.mu.Unlock()
		d.stopAutoscale(dep)
		if _, err := d.Client.ServiceRemove(ctx, cur.ID, client.ServiceRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("remove service: %w", err)
		}
		if err := d.removeQueue(ctx, dep, true); err != nil {
			return err
		}
	}
	d.collectSecrets(ctx, dep, true)
	return d.removeVolumes(ctx, dep, rev, true)
}

// Remove deletes the deployment's service, secrets, volumes, network and
// images.
func (d *Driver) Remove(ctx context.Context, dep string) error {
	return d.remove(ctx, dep, true)
}

func (d *Driver) remove(ctx context.Context, dep string, claimed bool) error {
	d.mu.Lock()
	delete(d.deps, dep)
	delete(d.pools, dep)
	d.mu.Unlock()
	d.stopAutoscale(dep)
	if err := d.removeQueue(ctx, dep, claimed); err != nil {
		return err
	}
	res, err := d.Client.ServiceInspect(ctx, serviceName(dep), client.ServiceInspectOptions{})
	switch {
	case cerrdefs.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("inspect service: %w", err)
	case d.Docker.Ours(res.Service.Spec.Labels, claimed):
		if _, err := d.Client.ServiceRemove(ctx, res.Service.ID, client.ServiceRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("remove service: %w", err)
		}
	}
	// The service's containers go asynchronously; its volumes and
	// secrets can go once they have.
	if err := d.waitGone(ctx, dep); err != nil {
		return err
	}
	if err := d.removeSecrets(ctx, dep, claimed); err != nil {
		return err
	}
	if err := d.removeVolumes(ctx, dep, "", claimed); err != nil {
		return err
	}
	// The docker runtime's removal takes the network, the images and the
	// build files, each only when this install's.
	return d.Docker.RemoveOf(ctx, dep, claimed)
}

// waitGone waits until no container of the deployment's tasks is left on
// this node.
func (d *Driver) waitGone(ctx context.Context, dep string) error {
	deadline := time.Now().Add(d.grace() + 15*time.Second)
	for {
		left := 0
		for _, name := range []string{serviceName(dep), queueServiceName(dep)} {
			f := client.Filters{}.Add("label", "com.docker.swarm.service.name="+name)
			res, err := d.Client.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
			if err != nil {
				return fmt.Errorf("list containers: %w", err)
			}
			left += len(res.Items)
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d containers of the services of deployment %s are still there", left, dep)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (d *Driver) removeVolumes(ctx context.Context, dep, rev string, claimed bool) error {
	f := client.Filters{}.Add("label", docker.LabelManaged+"=true").Add("label", docker.LabelDeployment+"="+dep)
	if rev != "" {
		f = f.Add("label", docker.LabelRevision+"="+rev)
	}
	vs, err := d.Client.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		return fmt.Errorf("list volumes: %w", err)
	}
	var errs []error
	for _, v := range vs.Items {
		if !d.Docker.Ours(v.Labels, claimed) {
			continue
		}
		if _, err := d.Client.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove volume %s: %w", v.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Reconcile runs once at start-up: services, secrets, volumes and
// networks of this install that no record claims go (a deployment deleted
// while Slipway was down); the services of deployments on record are left
// for Deploy, which adopts one that runs the active revision and updates
// one that does not (runtime.Reconciler).
func (d *Driver) Reconcile(ctx context.Context, deployments map[string]string) error {
	mine := client.Filters{}.Add("label", docker.LabelManaged+"=true").Add("label", docker.LabelInstance+"="+d.Docker.Instance)
	svcs, err := d.Client.ServiceList(ctx, client.ServiceListOptions{Filters: mine})
	if err != nil {
		return fmt.Errorf("list services: %w", err)
	}
	secs, err := d.Client.SecretList(ctx, client.SecretListOptions{Filters: mine})
	if err != nil {
		return fmt.Errorf("list secrets: %w", err)
	}
	orphans := map[string]bool{}
	for _, s := range svcs.Items {
		if dep := s.Spec.Labels[docker.LabelDeployment]; dep != "" {
			if _, known := deployments[dep]; !known {
				orphans[dep] = true
			}
		}
	}
	for _, s := range secs.Items {
		if dep := s.Spec.Labels[docker.LabelDeployment]; dep != "" {
			if _, known := deployments[dep]; !known {
				orphans[dep] = true
			}
		}
	}
	// Networks and volumes can outlive their service.
	nets, err := d.Client.NetworkList(ctx, client.NetworkListOptions{Filters: mine})
	if err != nil {
		return fmt.Errorf("list networks: %w", err)
	}
	vols, err := d.Client.VolumeList(ctx, client.VolumeListOptions{Filters: mine})
	if err != nil {
		return fmt.Errorf("list volumes: %w", err)
	}
	for _, n := range nets.Items {
		if dep := n.Labels[docker.LabelDeployment]; dep != "" {
			if _, known := deployments[dep]; !known {
				orphans[dep] = true
			}
		}
	}
	for _, v := range vols.Items {
		if dep := v.Labels[docker.LabelDeployment]; dep != "" {
			if _, known := deployments[dep]; !known {
				orphans[dep] = true
			}
		}
	}
	var errs []error
	for dep := range orphans {
		d.Log.Info().Str("deployment_id", dep).Msg("removing a swarm deployment no record claims")
		errs = append(errs, d.remove(ctx, dep, false))
	}
	return errors.Join(errs...)
}

// CheckHealth reports whether revision rev serves dep
// (runtime.HealthChecker).
func (d *Driver) CheckHealth(ctx context.Context, dep, rev string) error {
	cur, found, err := d.service(ctx, dep)
	if err != nil {
		return err
	}
	if !found {
		return errors.New("the deployment's service is gone (removed outside Slipway)")
	}
	if got := cur.Spec.Labels[docker.LabelRevision]; got != rev {
		return fmt.Errorf("the service runs revision %s", got)
	}
	ep, ok := d.serves(ctx, cur)
	if !ok {
		return errors.New("no task of the service answers GET /ok")
	}
	d.mu.Lock()
	if s, ok := d.deps[dep]; ok && s.rev == rev {
		s.endpoint = ep // a task Swarm replaced publishes another port
		d.deps[dep] = s
	}
	d.mu.Unlock()
	return nil
}
