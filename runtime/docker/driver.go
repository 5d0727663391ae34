// Package docker runs deployments with a Docker engine: it builds an image
// per revision from the uploaded source (or uses a given image), and runs
// it as a container on a network of the deployment's own, beside a volume
// that holds the agent's database across revisions.
//
// Names of what it creates, all labelled (see LabelManaged and friends):
//
//	network   slipway-<deployment>
//	volume    slipway-<deployment>-data                 the agent database
//	volume    slipway-<deployment>-<revision>-<name>    an emptyDir
//	volume    slipway-<deployment>-pvc-<claim>          a persistentVolumeClaim
//	image     slipway-agent:<binary hash>               FROM scratch + slipway
//	image     slipway/<deployment>:<revision>           an internal_source build
//	container slipway-<deployment>-<revision>[-<init or sidecar name>]
package docker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/rs/zerolog"

	"slipway/runtime"
	"slipway/runtime/build"
)

// Engine is the part of the Docker API the driver uses.
type Engine interface {
	client.ContainerAPIClient
	client.ImageAPIClient
	client.ImageBuildAPIClient
	client.NetworkAPIClient
	client.VolumeAPIClient
	Ping(ctx context.Context, options client.PingOptions) (client.PingResult, error)
	Info(ctx context.Context, options client.InfoOptions) (client.SystemInfoResult, error)
}

// Driver is the docker runtime.
type Driver struct {
	Client Engine
	Bin    string // the static slipway binary copied into the agent image
	Root   string // scratch space for unpacking sources
	// SecretsDir holds secret objects for secret_references:
	// <dir>/<secret name>/<key>.
	SecretsDir string
	Gate       *runtime.Gate
	Log        zerolog.Logger
	// HealthTimeout bounds how long a new revision may take to answer GET /ok.
	HealthTimeout time.Duration
	// StopGrace is how long an agent gets to finish after SIGTERM.
	StopGrace time.Duration
	// APIAddr is Slipway's own listen address (SLIPWAY_ADDR): whether
	// containers can reach the API depends on it (see Isolation).
	APIAddr string
	// Instance is the install's identity (storage.InstanceID), put on
	// every object as LabelInstance. Other installs may share the engine:
	// the driver only ever lists, adopts or removes objects with its own.
	Instance string
	// DefaultMemoryMB is the memory limit of a container whose spec names
	// none (limits.go); 0: none.
	DefaultMemoryMB int

	isoOnce sync.Once
	iso     runtime.Isolation

	baseMu sync.Mutex
	base   string // the agent image tag, once built

	// ImageCache keeps debootstrap's root filesystems between builds
	// (DefaultImageCache when empty).
	ImageCache string
	// builds locks each language, root filesystem and dependencies image
	// while it is built: builds of different images go on side by side
	// (buildlock.go).
	builds buildLocks
	// PythonBaseImage and NodeBaseImage are the official images the agent
	// images are built on ({version} replaced; defaults in base.go), pulled
	// within BasePullTimeout (0: never pulled); see base.go.
	PythonBaseImage, NodeBaseImage string
	BasePullTimeout                time.Duration
	pullMu                         sync.Mutex
	pullFailed                     map[string]pullFailure // under pullMu
	// buildMu is read-held by each build: image collection after a
	// deletion skips language images while one runs (prune.go).
	buildMu sync.RWMutex

	mu         sync.Mutex
	deps       map[string]serving // deployment → its serving revision
	refreshing map[string]bool

	outputs outputs // see output.go
}

type serving struct {
	rev, container, endpoint string
	// members is a scaled revision's group (replicas.go), nil for one
	// agent; container and endpoint are then its first API replica's.
	members []*member
}

// Connect returns a client for the engine named by the environment
// (DOCKER_HOST, default the local socket), negotiating the API version so
// that old engines (Debian's, API 1.41) and current ones both work, and
// pings it.
func Connect(ctx context.Context) (*client.Client, string, error) {
	c, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, "", fmt.Errorf("docker client: %w", err)
	}
	ping, err := c.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	if err != nil {
		c.Close()
		return nil, "", fmt.Errorf("no Docker engine answers at %s: %w", c.DaemonHost(), err)
	}
	return c, ping.APIVersion, nil
}

func (d *Driver) Name() string { return "docker" }

func (d *Driver) labels(dep, rev, role string) map[string]string {
	l := map[string]string{LabelManaged: "true", LabelInstance: d.Instance, LabelDeployment: dep, LabelRole: role}
	if rev != "" {
		l[LabelRevision] = rev
	}
	return l
}

// ours says whether an object with labels l belongs to this install: it
// carries this install's id, or (made by a version of Slipway before
// install ids) none, and a deployment of this install's record names it
// (claimed). Deployment ids are random UUIDs, so an unlabelled object that
// a record claims by id is this install's; one no record claims may be
// another install's and is left alone.
func (d *Driver) ours(l map[string]string, claimed bool) bool {
	if l[LabelManaged] != "true" {
		return false
	}
	inst := l[LabelInstance]
	return inst != "" && inst == d.Instance || inst == "" && claimed
}

func networkName(dep string) string    { return "slipway-" + dep }
func dataVolume(dep string) string     { return "slipway-" + dep + "-data" }
func agentName(dep, rev string) string { return "slipway-" + dep + "-" + rev }
func imageTag(dep, rev string) string  { return "slipway/" + dep + ":" + rev }

// Build produces the revision's image: for internal_source, an image built
// from the uploaded archive; for docker sources, the given image, pulled
// only when absent.
func (d *Driver) Build(ctx context.Context, s runtime.Spec, log io.Writer) (string, error) {
	if s.Source != "internal_source" {
		if s.ImageURI == "" {
			return "", fmt.Errorf("%w: source %s needs source_revision_config.image_uri", runtime.ErrUnsupported, s.Source)
		}
		if err := d.ensureImage(ctx, s.ImageURI, "IfNotPresent", log); err != nil {
			return "", err
		}
		if err := d.ownImage(ctx, s.ImageURI, s); err != nil {
			return "", err
		}
		return s.ImageURI, nil
	}
	// Until the revision image names its base, collection must not take
	// a language image from under this build (prune.go).
	d.buildMu.RLock()
	defer d.buildMu.RUnlock()
	// A build that waits for another's image names this deployment.
	ctx = withDeployment(ctx, s.WorkspaceID, s.DeploymentName)
	tag := imageTag(s.DeploymentID, s.RevisionID)
	if _, err := d.Client.ImageInspect(ctx, tag); err == nil {
		fmt.Fprintf(log, "image %s was built before\n", tag)
		return tag, nil // builds are deterministic per revision
	}
	base, err := d.agentImage(ctx, log)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(d.Root, s.DeploymentID, s.RevisionID)
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("clear %s: %w", dir, err)
	}
	defer os.RemoveAll(dir) // the image holds the source from here on
	app := filepath.Join(dir, "app")
	fmt.Fprintf(log, "unpacking source archive\n")
	if err := build.Unpack(s.TarballPath, app, build.DefaultLimits); err != nil {
		return "", err
	}
	// Everything of the source (the configuration, the files that name
	// dependencies, the build context) is read through this one Tree: no
	// link in it is followed, and errors name files relative to it.
	tree, err := build.OpenTree(app)
	if err != nil {
		return "", fmt.Errorf("the unpacked source: %w", err)
	}
	defer tree.Close()
	cfgPath, err := graphConfig(s.GraphConfig)
	if err != nil {
		return "", err
	}
	raw, err := tree.ReadFile(cfgPath, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("graph configuration file %q is not in the uploaded source", cfgPath)
	} else if err != nil {
		return "", fmt.Errorf("graph configuration file: %w", err)
	}
	g, err := ParseGraphFile(raw)
	if err != nil {
		return "", err
	}
	proj, err := build.ParseProject(raw)
	if err != nil {
		return "", err
	}
	imgLabels := d.labels(s.DeploymentID, s.RevisionID, "image")
	imgLabels[LabelWorkspace] = s.WorkspaceID
	imgLabels[LabelBase] = base
	lang, err := projectLanguage(proj)
	if err != nil {
		return "", err
	}
	var df string
	if lang == nil {
		if df, err = dockerfile(base, g, cfgPath, s.InstallCommand, s.BuildCommand, imgLabels); err != nil {
			return "", err
		}
	}
	if g.BaseImage != "" {
		if err := d.ensureImage(ctx, g.BaseImage, "IfNotPresent", log); err != nil {
			return "", err
		}
		if err := d.ownImage(ctx, g.BaseImage, s); err != nil {
			return "", err
		}
	}
	for _, l := range g.DockerfileLines {
		for _, ref := range lineImages(l) {
			if err := d.ownImage(ctx, ref, s); err != nil {
				return "", err
			}
		}
	}
	if lang != nil {
		if err := lang(d, ctx, s, tree, cfgPath, proj, g, tag, imgLabels, log); err != nil {
			return "", err
		}
		return tag, nil
	}
	bc, err := contextTar(tree, df)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(log, "building image %s\n", tag)
	if err := d.build(ctx, bc, tag, nil, log); err != nil {
		return "", err
	}
	return tag, nil
}

// graphConfig cleans the graph configuration path, which must stay inside
// the source tree.
func graphConfig(rel string) (string, error) {
	return build.GraphConfigPath(rel)
}

// containers lists this install's containers of a deployment on record
// (every deployment's when dep is ""; Reconcile sorts those), of one
// revision and role (all when "").
func (d *Driver) containers(ctx context.Context, dep, rev, role string) ([]container.Summary, error) {
	f := client.Filters{}.Add("label", LabelManaged+"=true")
	if dep != "" {
		f = f.Add("label", LabelDeployment+"="+dep)
	}
	if rev != "" {
		f = f.Add("label", LabelRevision+"="+rev)
	}
	if role != "" {
		f = f.Add("label", LabelRole+"="+role)
	}
	res, err := d.Client.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	if dep == "" {
		return res.Items, nil
	}
	var out []container.Summary
	for _, c := range res.Items {
		if d.ours(c.Labels, true) {
			out = append(out, c)
		}
	}
	return out, nil
}

// Deploy hands the deployment over to this revision. A deployment's agent
// database is one file only one agent may hold, so new requests wait at the
// gate while the serving container stops and this one starts on the same
// volume; if this one never becomes healthy, the previous one starts again.
func (d *Driver) Deploy(ctx context.Context, s runtime.Spec, image string, log io.Writer) (string, error) {
	p, err := makePlan(s, d.SecretsDir)
	if err != nil {
		return "", err
	}
	p.applyDefaultMemory(d.DefaultMemoryMB)
	scaled := s.Scale.Scaled()
	if scaled {
		p.queue = withDefaultMemory(queueResources(s.ResourceSpec), d.DefaultMemoryMB)
	}
	if err := d.ensureShared(ctx, s.DeploymentID, s.DeploymentName); err != nil {
		return "", err
	}
	agents, err := d.containers(ctx, s.DeploymentID, "", "agent")
	if err != nil {
		return "", err
	}
	var prev []container.Summary
	for _, c := range agents {
		if c.Labels[LabelRevision] == s.RevisionID {
			if c.State == container.StateRunning && !scaled {
				if ep, err := d.endpointOf(ctx, c.ID, s.DeploymentID, false); err == nil && healthy(ep) {
					// Already serving (adopted after a restart of Slipway).
					d.set(s.DeploymentID, serving{rev: s.RevisionID, container: c.ID, endpoint: ep})
					fmt.Fprintf(log, "revision %s is already serving on %s\n", s.RevisionID, ep)
					return ep, nil
				}
			}
			continue
		}
		if c.State == container.StateRunning || c.State == container.StateRestarting {
			prev = append(prev, c)
		}
	}
	if scaled {
		if ep, ok := d.adoptGroup(ctx, s, agents); ok {
			fmt.Fprintf(log, "revision %s is already serving on %s\n", s.RevisionID, ep)
			return ep, nil
		}
	}
	for _, sc := range append(append([]sidecar(nil), p.inits...), p.sidecars...) {
		if err := d.ensureImage(ctx, sc.image, sc.pullPolicy, log); err != nil {
			return "", fmt.Errorf("container %q: %w", sc.name, err)
		}
		if err := d.ownImage(ctx, sc.image, s); err != nil {
			return "", fmt.Errorf("container %q: %w", sc.name, err)
		}
	}
	// Leftovers of an earlier attempt at this revision would clash by name.
	if err := d.removeContainers(ctx, s.DeploymentID, s.RevisionID); err != nil {
		return "", err
	}
	for _, v := range p.volumes {
		if err := d.ensureVolume(ctx, v.name, s.DeploymentID, map[bool]string{true: s.RevisionID}[v.perRevison]); err != nil {
			return "", err
		}
	}

	resume := d.Gate.Pause(s.DeploymentID)
	defer resume()
	for _, c := range prev {
		fmt.Fprintf(log, "stopping revision %s\n", revisionOf(c))
		if err := d.stop(ctx, c.ID); err != nil {
			return "", err
		}
	}
	var ep, id string
	var members []*member
	if scaled {
		if members, err = d.startGroup(ctx, s, image, p, log); err == nil {
			ep, id = members[0].endpoint, members[0].container
		}
	} else {
		ep, id, err = d.start(ctx, s, image, p, log)
	}
	if err != nil {
		if rerr := d.removeContainers(context.Background(), s.DeploymentID, s.RevisionID); rerr != nil {
			d.Log.Warn().Err(rerr).Msg("remove failed revision containers")
		}
		for _, c := range prev {
			fmt.Fprintf(log, "starting revision %s again\n", revisionOf(c))
		}
		d.restartPrevious(prev)
		return "", err
	}
	d.set(s.DeploymentID, serving{rev: s.RevisionID, container: id, endpoint: ep, members: members})
	fmt.Fprintf(log, "revision %s is serving on %s\n", s.RevisionID, ep)
	return ep, nil
}

// startAgain starts a previous revision's stopped container and waits
// until its agent answers GET /ok; a failure is logged, and ok is false.
func (d *Driver) startAgain(ctx context.Context, id, dep string) (endpoint string, ok bool) {
	if _, err := d.Client.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		d.Log.Error().Err(err).Str("container", id).Msg("restart previous revision")
		return "", false
	}
	ep, err := d.waitHealthy(ctx, id, dep, false)
	if err != nil {
		d.Log.Error().Err(err).Str("container", id).Msg("previous revision did not become healthy again")
		return "", false
	}
	return ep, true
}

// restart brings a previous revision's container back after a failed
// handover, and makes it the deployment's endpoint again.
func (d *Driver) restart(c container.Summary) {
	ctx, cancel := context.WithTimeout(context.Background(), d.healthTimeout())
	defer cancel()
	dep := c.Labels[LabelDeployment]
	ep, ok := d.startAgain(ctx, c.ID, dep)
	if !ok {
		return
	}
	d.set(dep, serving{rev: c.Labels[LabelRevision], container: c.ID, endpoint: ep})
}

// ensureShared creates the deployment's network and data volume.
func (d *Driver) ensureShared(ctx context.Context, dep, name string) error {
	l := d.labels(dep, "", "network")
	l[LabelName] = name
	if _, err := d.Client.NetworkInspect(ctx, networkName(dep), client.NetworkInspectOptions{}); cerrdefs.IsNotFound(err) {
		_, err = d.Client.NetworkCreate(ctx, networkName(dep), client.NetworkCreateOptions{Driver: "bridge", Labels: l})
		if err != nil && !cerrdefs.IsConflict(err) {
			return fmt.Errorf("create network: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("inspect network: %w", err)
	}
	return d.ensureVolume(ctx, dataVolume(dep), dep, "")
}

func (d *Driver) ensureVolume(ctx context.Context, name, dep, rev string) error {
	if _, err := d.Client.VolumeInspect(ctx, name, client.VolumeInspectOptions{}); err == nil {
		return nil
	}
	role := "volume"
	if name == dataVolume(dep) {
		role = "data"
	}
	if _, err := d.Client.VolumeCreate(ctx, client.VolumeCreateOptions{Name: name, Labels: d.labels(dep, rev, role)}); err != nil {
		return fmt.Errorf("create volume %s: %w", name, err)
	}
	return nil
}

// start runs the init containers to completion, then the agent and its
// sidecars, and waits for the agent's health check.
func (d *Driver) start(ctx context.Context, s runtime.Spec, image string, p *plan, log io.Writer) (endpoint, id string, err error) {
	dep, rev := s.DeploymentID, s.RevisionID
	if err := d.runInits(ctx, s, p, agentName(dep, rev)+"-", log); err != nil {
		return "", "", err
	}
	id, err = d.startAgent(ctx, s, image, p, runtime.Replica{}, log)
	if err != nil {
		return "", "", err
	}
	hctx, cancel := context.WithTimeout(ctx, d.healthTimeout())
	defer cancel()
	ep, err := d.waitHealthy(hctx, id, dep, true)
	if err != nil {
		if tail := d.logTail(id); tail != "" {
			fmt.Fprintf(log, "agent output:\n%s\n", tail)
		}
		return "", "", err
	}
	return ep, id, nil
}

// runInits runs the init containers to completion, named prefix+name.
func (d *Driver) runInits(ctx context.Context, s runtime.Spec, p *plan, prefix string, log io.Writer) error {
	dep, rev := s.DeploymentID, s.RevisionID
	netcfg := &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{networkName(dep): {}}}
	for _, ic := range p.inits {
		fmt.Fprintf(log, "running init container %s\n", ic.name)
		cid, err := d.create(ctx, prefix+ic.name, ic.config(d.labels(dep, rev, "init"), p.labels),
			ic.hostConfig(container.NetworkMode(networkName(dep))), netcfg)
		if err != nil {
			return err
		}
		if err := d.runToCompletion(ctx, cid, ic.name, log); err != nil {
			return err
		}
	}
	return nil
}

// startAgent creates and starts one agent container and its sidecars:
// the deployment's one agent (r.Name ""), or replica r of a scaled
// revision (replicas.go: its name, labels, environment, data volume and
// limits).
func (d *Driver) startAgent(ctx context.Context, s runtime.Spec, image string, p *plan, r runtime.Replica, log io.Writer) (string, error) {
	dep, rev := s.DeploymentID, s.RevisionID
	netcfg := &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{networkName(dep): {}}}
	name, volume, resources := agentName(dep, rev), dataVolume(dep), p.resources
	own := append([]string{"SLIPWAY_AGENT_DATA_DIR=/data"}, agentEnv(s)...)
	if r.Name != "" {
		name, volume, resources = replicaContainer(dep, rev, r), replicaVolume(dep, r), p.replicaResources(r)
		own = append(own, replicaEnv(r)...)
	}
	cfg := &container.Config{
		Image:  image,
		Env:    runtime.Settle(p.env, own),
		Labels: merge(p.labels, d.labels(dep, rev, "agent")),
	}
	cfg.Labels[LabelName] = s.DeploymentName
	replicaLabels(cfg.Labels, r)
	// An image Slipway built keeps everything the agent writes on its data
	// volume and in /tmp, so its root filesystem can be read only; an image
	// given by reference may expect to write anywhere.
	hc := harden(&container.HostConfig{
		NetworkMode: container.NetworkMode(networkName(dep)),
		Resources:   resources,
		Mounts: append([]mount.Mount{{Type: mount.TypeVolume, Source: volume, Target: "/data"}},
			p.mounts...),
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyUnlessStopped},
	}, s.Source == "internal_source")
	id, err := d.create(ctx, name, cfg, hc, netcfg)
	if err != nil {
		return "", err
	}
	if _, err := d.Client.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return "", fmt.Errorf("start the agent container: %w", err)
	}
	for _, sc := range p.sidecars {
		fmt.Fprintf(log, "starting sidecar %s\n", sc.name)
		// Sidecars share the agent's network namespace, as in a pod.
		scfg := sc.config(d.labels(dep, rev, "sidecar"), p.labels)
		replicaLabels(scfg.Labels, r)
		sid, err := d.create(ctx, name+"-"+sc.name, scfg, sc.hostConfig(container.NetworkMode("container:"+id)), nil)
		if err != nil {
			return "", err
		}
		if _, err := d.Client.ContainerStart(ctx, sid, client.ContainerStartOptions{}); err != nil {
			return "", fmt.Errorf("start sidecar %s: %w", sc.name, err)
		}
	}
	return id, nil
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

func (sc sidecar) config(ours, user map[string]string) *container.Config {
	c := &container.Config{Image: sc.image, Env: sc.env, Labels: merge(user, ours), WorkingDir: sc.workingDir}
	c.Labels["dev.slipway.container"] = sc.name
	if len(sc.entrypoint) > 0 {
		c.Entrypoint = sc.entrypoint
	}
	if len(sc.cmd) > 0 {
		c.Cmd = sc.cmd
	}
	return c
}

// hostConfig of an init container or a sidecar: the same hardening as the
// agent. Their images are the user's, run as the user the image names (a
// Kubernetes securityContext has no effect here, so it can ask for no
// more); without capabilities even uid 0 there owns only the container's
// own files. Their root filesystem stays writable: such images commonly
// write outside a volume.
func (sc sidecar) hostConfig(nm container.NetworkMode) *container.HostConfig {
	return harden(&container.HostConfig{NetworkMode: nm, Resources: sc.resources, Mounts: sc.mounts,
		RestartPolicy: container.RestartPolicy{Name: sc.restart}}, false)
}

func (d *Driver) create(ctx context.Context, name string, cfg *container.Config, hc *container.HostConfig, nc *network.NetworkingConfig) (string, error) {
	res, err := d.Client.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name, Config: cfg, HostConfig: hc, NetworkingConfig: nc})
	if err != nil {
		return "", fmt.Errorf("create container %s: %w", name, err)
	}
	return res.ID, nil
}

// runToCompletion starts an init container and waits for it to exit 0.
func (d *Driver) runToCompletion(ctx context.Context, id, name string, log io.Writer) error {
	wait := d.Client.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := d.Client.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("start init container %s: %w", name, err)
	}
	select {
	case r := <-wait.Result:
		if tail := d.logTail(id); tail != "" {
			fmt.Fprintf(log, "%s output:\n%s\n", name, tail)
		}
		if r.StatusCode != 0 {
			return fmt.Errorf("init container %s exited with status %d", name, r.StatusCode)
		}
		return nil
	case err := <-wait.Error:
		return fmt.Errorf("wait for init container %s: %w", name, err)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// logTail is the last few KiB of a container's output, for failure logs.
func (d *Driver) logTail(id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rc, err := d.Client.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: "40"})
	if err != nil {
		return ""
	}
	defer rc.Close()
	var out strings.Builder
	// Without a TTY the stream is multiplexed; demultiplex into one.
	_, _ = stdcopy.StdCopy(&out, &out, io.LimitReader(rc, 64<<10))
	return strings.TrimSpace(out.String())
}

// endpointOf is the agent's address on the deployment network.
// A fresh container (starting) that restarted has exited at least once: its
// restart policy must not hide that from the health check.
func (d *Driver) endpointOf(ctx context.Context, id, dep string, starting bool) (string, error) {
	res, err := d.Client.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return "", fmt.Errorf("inspect the agent container: %w", err)
	}
	c := res.Container
	if starting && c.RestartCount > 0 {
		return "", fmt.Errorf("the agent container exited (restarted %d times)", c.RestartCount)
	}
	if c.State == nil || !c.State.Running || c.State.Restarting {
		msg := "the agent container is not running"
		if c.State != nil && c.State.Status == container.StateExited || c.State != nil && c.State.Restarting {
			msg = fmt.Sprintf("the agent container exited with status %d", c.State.ExitCode)
		}
		return "", errors.New(msg)
	}
	if c.NetworkSettings == nil || c.NetworkSettings.Networks[networkName(dep)] == nil ||
		!c.NetworkSettings.Networks[networkName(dep)].IPAddress.IsValid() {
		return "", errors.New("the agent container has no address on the deployment network yet")
	}
	return "http://" + c.NetworkSettings.Networks[networkName(dep)].IPAddress.String() + ":8000", nil
}

var healthClient = &http.Client{Timeout: 2 * time.Second}

func healthy(endpoint string) bool {
	resp, err := healthClient.Get(endpoint + "/ok")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// waitHealthy polls the agent's GET /ok; a container that exits fails at
// once instead of waiting out the timeout.
func (d *Driver) waitHealthy(ctx context.Context, id, dep string, fresh bool) (string, error) {
	var last error
	for {
		ep, err := d.endpointOf(ctx, id, dep, fresh)
		if err == nil && healthy(ep) {
			return ep, nil
		}
		if err != nil && strings.Contains(err.Error(), "exited") {
			return "", fmt.Errorf("the agent did not become healthy: %w", err)
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = errors.New("GET /ok did not answer 200")
			}
			return "", fmt.Errorf("health check did not pass within %v: %w", d.healthTimeout(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (d *Driver) stop(ctx context.Context, id string) error {
	secs := int(d.grace() / time.Second)
	if _, err := d.Client.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &secs}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("stop container: %w", err)
	}
	return nil
}

// removeContainers force-removes a deployment's containers: one revision's,
// or all when rev is "". The deployment is on record (claimed).
func (d *Driver) removeContainers(ctx context.Context, dep, rev string) error {
	return d.removeContainersOf(ctx, dep, rev, true)
}

func (d *Driver) removeContainersOf(ctx context.Context, dep, rev string, claimed bool) error {
	f := client.Filters{}.Add("label", LabelManaged+"=true").Add("label", LabelDeployment+"="+dep)
	if rev != "" {
		f = f.Add("label", LabelRevision+"="+rev)
	}
	res, err := d.Client.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	var errs []error
	for _, c := range res.Items {
		if !d.ours(c.Labels, claimed) {
			continue
		}
		if c.State == container.StateRunning && c.Labels[LabelRole] == "agent" {
			_ = d.stop(ctx, c.ID) // let the agent close its database cleanly
		}
		if _, err := d.Client.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove container %s: %w", c.ID, err))
		}
	}
	return errors.Join(errs...)
}

func (d *Driver) set(dep string, s serving) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.deps == nil {
		d.deps = map[string]serving{}
	}
	d.deps[dep] = s
	d.follow(dep, s)
}

// Refresh finds the serving agent again after it stopped answering: its
// address may have changed (a restart by its restart policy), or it may
// have been stopped or killed outside Slipway, which the restart policy
// does not undo; then it is started again. One refresh per deployment runs
// at a time; the others return at once.
func (d *Driver) Refresh(dep string) {
	d.mu.Lock()
	s, ok := d.deps[dep]
	if !ok || d.refreshing[dep] {
		d.mu.Unlock()
		return
	}
	if d.refreshing == nil {
		d.refreshing = map[string]bool{}
	}
	d.refreshing[dep] = true
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.refreshing, dep)
		d.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), d.healthTimeout())
	defer cancel()
	if s.members != nil {
		_ = d.checkGroup(ctx, dep, s, true) // its members' addresses and states are what matter
		return
	}
	ep, err := d.endpointOf(ctx, s.container, dep, false)
	if err != nil {
		d.Log.Warn().Err(err).Str("deployment_id", dep).Msg("the serving agent is down; starting it again")
		if _, err := d.Client.ContainerStart(ctx, s.container, client.ContainerStartOptions{}); err != nil {
			d.Log.Error().Err(err).Str("deployment_id", dep).Msg("start the serving agent")
			return
		}
		if ep, err = d.waitHealthy(ctx, s.container, dep, false); err != nil {
			d.Log.Error().Err(err).Str("deployment_id", dep).Msg("the serving agent did not become healthy")
			return
		}
	}
	if ep == s.endpoint {
		return
	}
	d.mu.Lock()
	if cur, ok := d.deps[dep]; ok && cur.container == s.container {
		cur.endpoint = ep
		d.deps[dep] = cur
	}
	d.mu.Unlock()
	d.Log.Info().Str("deployment_id", dep).Str("endpoint", ep).Msg("the serving agent moved")
}

// CheckHealth reports whether revision rev serves dep: its agent
// container exists, runs, and answers GET /ok (runtime.HealthChecker). A
// container that came back at another address is followed.
func (d *Driver) CheckHealth(ctx context.Context, dep, rev string) error {
	d.mu.Lock()
	s, ok := d.deps[dep]
	d.mu.Unlock()
	if !ok {
		return errors.New("no agent container of the deployment is serving")
	}
	if s.rev != rev {
		return fmt.Errorf("the serving agent is of revision %s", s.rev)
	}
	if s.members != nil {
		return d.checkGroup(ctx, dep, s, false)
	}
	ep, err := d.endpointOf(ctx, s.container, dep, false)
	if cerrdefs.IsNotFound(err) {
		// Requests are answered 503 at once rather than sent to a dead
		// address, until the agent is recreated.
		d.mu.Lock()
		if cur, ok := d.deps[dep]; ok && cur.container == s.container {
			delete(d.deps, dep)
		}
		d.mu.Unlock()
		return errors.New("the agent container is gone (removed outside Slipway)")
	}
	if err != nil {
		return err
	}
	if !healthy(ep) {
		return errors.New("the agent container runs but GET /ok did not answer 200")
	}
	if ep != s.endpoint {
		d.mu.Lock()
		if cur, ok := d.deps[dep]; ok && cur.container == s.container {
			cur.endpoint = ep
			d.deps[dep] = cur
		}
		d.mu.Unlock()
	}
	return nil
}

// eventSource is the part of the engine API that streams events; every
// engine has it, test doubles may not.
type eventSource interface {
	Events(ctx context.Context, options client.EventsListOptions) client.EventsResult
}

// WatchHealth follows the engine's events for this install's agent
// containers and calls lost when a serving one dies, stops or is removed
// (runtime.HealthNotifier), until ctx ends. A broken stream is opened
// again; meanwhile the watcher's periodic checks still notice.
func (d *Driver) WatchHealth(ctx context.Context, lost func(dep string)) {
	es, ok := d.Client.(eventSource)
	if !ok {
		return
	}
	f := client.Filters{}.Add("type", "container").Add("label", LabelInstance+"="+d.Instance).
		Add("label", LabelRole+"=agent").Add("event", "die").Add("event", "stop").Add("event", "destroy").Add("event", "oom")
	go func() {
		for ctx.Err() == nil {
			sctx, cancel := context.WithCancel(ctx)
			res := es.Events(sctx, client.EventsListOptions{Filters: f})
		stream:
			for {
				select {
				case m := <-res.Messages:
					dep := m.Actor.Attributes[LabelDeployment]
					d.mu.Lock()
					s, serving := d.deps[dep]
					mem := s.memberOf(m.Actor.ID)
					if mem != nil {
						mem.up = false // no more requests until a check finds it answering
					}
					d.mu.Unlock()
					if serving && (s.container == m.Actor.ID || mem != nil) {
						lost(dep)
					}
				case err := <-res.Err:
					if ctx.Err() == nil {
						d.Log.Warn().Err(err).Msg("docker event stream ended; opening it again")
					}
					break stream
				case <-ctx.Done():
					break stream
				}
			}
			cancel()
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	}()
}

// Stop removes one revision's containers and its emptyDir volumes; its
// image stays for a quick rollback until the deployment is removed.
func (d *Driver) Stop(ctx context.Context, dep, rev string) error {
	d.mu.Lock()
	if s, ok := d.deps[dep]; ok && s.rev == rev {
		delete(d.deps, dep)
	}
	d.mu.Unlock()
	if err := d.removeContainers(ctx, dep, rev); err != nil {
		return err
	}
	return d.removeVolumes(ctx, dep, rev, true)
}

func (d *Driver) removeVolumes(ctx context.Context, dep, rev string, claimed bool) error {
	f := client.Filters{}.Add("label", LabelManaged+"=true").Add("label", LabelDeployment+"="+dep)
	if rev != "" {
		f = f.Add("label", LabelRevision+"="+rev)
	}
	vs, err := d.Client.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		return fmt.Errorf("list volumes: %w", err)
	}
	var errs []error
	for _, v := range vs.Items {
		if !d.ours(v.Labels, claimed) {
			continue
		}
		if _, err := d.Client.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove volume %s: %w", v.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Remove deletes everything the deployment owns: containers, volumes (its
// agent database included), its network and its images.
func (d *Driver) Remove(ctx context.Context, dep string) error {
	if err := d.remove(ctx, dep, true); err != nil {
		return err
	}
	// The last deployment built on a language image takes it along.
	d.collectAfterRemove(ctx)
	return nil
}

// remove is Remove of a deployment this install's record claims, or (not
// claimed) of one only this install's labels name.
func (d *Driver) remove(ctx context.Context, dep string, claimed bool) error {
	d.mu.Lock()
	delete(d.deps, dep)
	d.mu.Unlock()
	if err := d.removeContainersOf(ctx, dep, "", claimed); err != nil {
		return err
	}
	if err := d.removeVolumes(ctx, dep, "", claimed); err != nil {
		return err
	}
	n, err := d.Client.NetworkInspect(ctx, networkName(dep), client.NetworkInspectOptions{})
	switch {
	case cerrdefs.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("inspect network: %w", err)
	case d.ours(n.Network.Labels, claimed):
		if _, err := d.Client.NetworkRemove(ctx, n.Network.ID, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("remove network: %w", err)
		}
	}
	imgs, err := d.Client.ImageList(ctx, client.ImageListOptions{
		Filters: client.Filters{}.Add("label", LabelManaged+"=true").Add("label", LabelDeployment+"="+dep)})
	if err != nil {
		return fmt.Errorf("list images: %w", err)
	}
	for _, img := range imgs.Items {
		if !d.ours(img.Labels, claimed) {
			continue
		}
		if _, err := d.Client.ImageRemove(ctx, img.ID, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("remove image %s: %w", img.ID, err)
		}
	}
	if err := os.RemoveAll(filepath.Join(d.Root, dep)); err != nil {
		return fmt.Errorf("remove build files: %w", err)
	}
	return nil
}

// Endpoint is where the deployment's serving revision listens.
func (d *Driver) Endpoint(dep string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.deps[dep]
	return s.endpoint, ok
}

// Reconcile runs once at start-up, before any deploy: deployments maps
// every deployment Slipway has a record of to its active revision ("" for
// none). Only this install's objects are looked at (see ours): containers
// of other revisions (a deploy a crash interrupted) are removed, and
// everything labelled with this install's id that no record claims (a
// deleted deployment). The active revisions' containers are left for
// Deploy to adopt or restart. Agent base images no revision uses go last
// (CollectImages).
func (d *Driver) Reconcile(ctx context.Context, deployments map[string]string) error {
	cs, err := d.Client.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: client.Filters{}.Add("label", LabelManaged+"=true")})
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	var errs []error
	orphans := map[string]bool{}
	for _, c := range cs.Items {
		dep, rev := c.Labels[LabelDeployment], c.Labels[LabelRevision]
		active, known := deployments[dep]
		if !d.ours(c.Labels, known) {
			continue // another install's, or an older version's that no record claims
		}
		switch {
		case !known:
			orphans[dep] = true
		case rev != active:
			d.Log.Info().Str("deployment_id", dep).Str("revision_id", rev).Str("container", c.Names[0]).Msg("removing a container no record claims")
			if _, err := d.Client.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
	}
	// Networks, volumes and images can outlive their containers.
	mine := client.Filters{}.Add("label", LabelManaged+"=true").Add("label", LabelInstance+"="+d.Instance)
	ns, err := d.Client.NetworkList(ctx, client.NetworkListOptions{Filters: mine})
	if err != nil {
		return fmt.Errorf("list networks: %w", err)
	}
	vs, err := d.Client.VolumeList(ctx, client.VolumeListOptions{Filters: mine})
	if err != nil {
		return fmt.Errorf("list volumes: %w", err)
	}
	is, err := d.Client.ImageList(ctx, client.ImageListOptions{Filters: mine})
	if err != nil {
		return fmt.Errorf("list images: %w", err)
	}
	var named []map[string]string
	for _, n := range ns.Items {
		named = append(named, n.Labels)
	}
	for _, v := range vs.Items {
		named = append(named, v.Labels)
	}
	for _, i := range is.Items {
		named = append(named, i.Labels)
	}
	for _, l := range named {
		if dep := l[LabelDeployment]; dep != "" && d.ours(l, false) {
			if _, known := deployments[dep]; !known {
				orphans[dep] = true
			}
		}
	}
	for dep := range orphans {
		d.Log.Info().Str("deployment_id", dep).Msg("removing a deployment no record claims")
		errs = append(errs, d.remove(ctx, dep, false))
	}
	errs = append(errs, d.CollectImages(ctx))
	return errors.Join(errs...)
}

func (d *Driver) grace() time.Duration { return cmp.Or(d.StopGrace, runtime.DefaultStopGrace) }

func (d *Driver) healthTimeout() time.Duration {
	return cmp.Or(d.HealthTimeout, runtime.DefaultHealthTimeout)
}
