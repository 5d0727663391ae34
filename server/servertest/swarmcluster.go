package servertest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"
)

// A multi-node Docker Swarm on one host, for tests: each node is a
// privileged container (privilegedNode) of the node image (swarmnode.go)
// running its own dockerd, on a bridge network of the test's own, with a
// registry beside them that every node trusts as an insecure registry. Everything it
// creates carries the cluster's id and is removed at the test's end, even
// when the test fails; nothing else on the engine is touched.

// SwarmCluster is a running test swarm.
type SwarmCluster struct {
	// ID is the cluster's random id, in every object's name and label.
	ID string
	// Network is the test network's name. HostAddr is the host's address
	// on it (its gateway), where the nodes and their tasks reach a server
	// the test runs on the host (one listening there, not on 127.0.0.1).
	Network  string
	HostAddr netip.Addr
	// Nodes are the swarm's nodes; Nodes[0] is the manager.
	Nodes []*SwarmNode
	// ManagerAPI is the manager's engine API as the host reaches it
	// (tcp://127.0.0.1:port); Manager is a client of it.
	ManagerAPI string
	Manager    *client.Client
	// RegistryHost is the registry as the host reaches it (127.0.0.1:port:
	// the host's engine pushes there without TLS, as it does to any
	// loopback registry); RegistryNodes is the same registry as the nodes
	// reach it (its name on the test network, port 5000). An image pushed
	// as RegistryHost/repo is pulled by the nodes as RegistryNodes/repo@digest.
	RegistryHost  string
	RegistryNodes string
	// StorageDriver is the nodes' storage driver (overlay2, or vfs where
	// overlay2 does not work nested).
	StorageDriver string

	engine *client.Client
}

// SwarmNode is one node of a SwarmCluster.
type SwarmNode struct {
	// Name is the node's container name and hostname (the swarm node's
	// Description.Hostname).
	Name        string
	ContainerID string
	// API is the node's engine API as the host reaches it; Client a client of it.
	API    string
	Client *client.Client
	// Addr is the node's address on the test network, which the host
	// reaches directly (a bridge on the host): ports the node publishes
	// for its tasks (host mode) are there. NodeID is its swarm id.
	Addr   netip.Addr
	NodeID string
}

const swarmNodeAPIPort = "2375/tcp"

// swarmNodeEntrypoint makes /sys and the cgroup hierarchies writable,
// which dockerd needs to run containers (a privileged container has them
// so; privilegedNode's does not), then runs dockerd with the arguments.
const swarmNodeEntrypoint = `set -e
mount -o remount,rw /sys
for d in $(awk '$3 == "cgroup" || $3 == "cgroup2" {print $2}' /proc/self/mounts); do mount -o remount,bind,rw "$d"; done
exec dockerd "$@"`

// privilegedNode makes h what --privileged makes a container, built from
// its parts: every capability the host allows, no seccomp or AppArmor
// profile, no masked or read-only /proc paths, every device in the
// device cgroup. --privileged itself asks for every capability the
// kernel knows, and its start fails ("unable to apply caps") where the
// engine's bounding set lacks one, as on machines that drop
// CAP_SYS_RESOURCE from their containers; so the capabilities missing
// from this process's bounding set (the engine's, on such a machine) are
// dropped instead.
func privilegedNode(h *container.HostConfig) *container.HostConfig {
	h.CapAdd = []string{"ALL"}
	h.CapDrop = missingCaps()
	h.SecurityOpt = []string{"seccomp=unconfined", "apparmor=unconfined", "label=disable"}
	h.MaskedPaths, h.ReadonlyPaths = []string{}, []string{}
	h.DeviceCgroupRules = []string{"a *:* rwm"}
	return h
}

// capNames are Linux's capabilities by number (linux/capability.h).
var capNames = []string{"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
	"SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER",
	"SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE",
	"SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP",
	"MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE"}

// missingCaps are the capabilities (of capNames) missing from this
// process's bounding set; none when it cannot be read.
func missingCaps() []string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil
	}
	return missingCapsOf(string(b))
}

// missingCapsOf reads the bounding set (CapBnd) of a /proc/<pid>/status.
func missingCapsOf(status string) []string {
	for _, line := range strings.Split(status, "\n") {
		hexBnd, ok := strings.CutPrefix(line, "CapBnd:")
		if !ok {
			continue
		}
		bnd, err := strconv.ParseUint(strings.TrimSpace(hexBnd), 16, 64)
		if err != nil {
			return nil
		}
		var out []string
		for i, name := range capNames {
			if bnd&(1<<i) == 0 {
				out = append(out, name)
			}
		}
		return out
	}
	return nil
}

// swarmRegistryConfig is the cluster registry's configuration.
const swarmRegistryConfig = `version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: /var/lib/docker-registry
  delete:
    enabled: true
http:
  addr: :5000
`

// StartSwarmCluster starts an n-node swarm (one manager, n-1 workers) and
// its registry; it skips (or fails under CI=true) without a Docker engine.
// The node image is built on first use (SwarmNodeImage).
func StartSwarmCluster(t testing.TB, n int) *SwarmCluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("a swarm needs a node, asked for %d", n)
	}
	e := DockerEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	image := SwarmNodeImage(t, ctx, e)

	var b [4]byte
	_, _ = rand.Read(b[:])
	c := &SwarmCluster{ID: hex.EncodeToString(b[:]), engine: e}
	prefix := "slipway-swarmtest-" + c.ID
	c.Network = prefix
	// Registered before anything exists, so a failure half-way still
	// removes whatever was created: everything is found by the label.
	t.Cleanup(func() { c.remove(t) })

	start := time.Now()
	if _, err := e.NetworkCreate(ctx, c.Network, client.NetworkCreateOptions{
		Driver: "bridge",
		Labels: map[string]string{labelSwarmTest: "network", labelSwarmCluster: c.ID},
	}); err != nil {
		t.Fatalf("create the test network: %v", err)
	}
	ni, err := e.NetworkInspect(ctx, c.Network, client.NetworkInspectOptions{})
	if err != nil {
		t.Fatalf("inspect the test network: %v", err)
	}
	for _, cfg := range ni.Network.IPAM.Config {
		if cfg.Gateway.Is4() {
			c.HostAddr = cfg.Gateway
		}
	}
	if !c.HostAddr.IsValid() {
		t.Fatalf("the test network has no IPv4 gateway: %+v", ni.Network.IPAM.Config)
	}

	// The registry: Debian's docker-registry on port 5000, storage in the
	// container, without the packaged configuration's htpasswd
	// authentication (the network is the test's own).
	regName := prefix + "-registry"
	regPort := network.MustParsePort("5000/tcp")
	reg, err := c.run(ctx, regName, "registry", &container.Config{
		Image:        image,
		Cmd:          []string{"sh", "-c", `printf '%s' "$0" >/etc/docker/registry/test.yml && exec docker-registry serve /etc/docker/registry/test.yml`, swarmRegistryConfig},
		ExposedPorts: network.PortSet{regPort: {}},
	}, &container.HostConfig{
		PortBindings: network.PortMap{regPort: {{HostIP: netip.MustParseAddr("127.0.0.1")}}},
	})
	if err != nil {
		t.Fatalf("start the registry: %v", err)
	}
	regHostPort, err := c.hostPort(ctx, reg, regPort)
	if err != nil {
		t.Fatalf("registry: %v", err)
	}
	c.RegistryHost = "127.0.0.1:" + regHostPort
	c.RegistryNodes = regName + ":5000"
	if err := waitHTTP(ctx, "http://"+c.RegistryHost+"/v2/", 60*time.Second); err != nil {
		t.Fatalf("the registry does not answer: %v\n%s", err, c.logs(reg))
	}

	// The nodes: overlay2 on the volume at /var/lib/docker where the
	// kernel allows overlay over the host's filesystem, else vfs (slower,
	// copies each layer, but works everywhere).
	c.StorageDriver = "overlay2"
	for i := 0; i < n; i++ {
		node, err := c.startNode(ctx, image, fmt.Sprintf("%s-node%d", prefix, i))
		if err != nil && i == 0 && c.StorageDriver == "overlay2" {
			t.Logf("dockerd with overlay2 does not start nested (%v); falling back to vfs", err)
			c.StorageDriver = "vfs"
			node, err = c.startNode(ctx, image, fmt.Sprintf("%s-node%d-vfs", prefix, i))
		}
		if err != nil {
			t.Fatalf("start swarm node %d: %v", i, err)
		}
		c.Nodes = append(c.Nodes, node)
	}
	c.ManagerAPI = c.Nodes[0].API
	c.Manager = c.Nodes[0].Client

	// The swarm: init on node 0, join the others as workers, all through
	// each node's own engine API.
	mgr := c.Nodes[0]
	if _, err := mgr.Client.SwarmInit(ctx, client.SwarmInitOptions{
		ListenAddr:    "0.0.0.0:2377",
		AdvertiseAddr: mgr.Addr.String(),
	}); err != nil {
		t.Fatalf("swarm init on %s: %v", mgr.Name, err)
	}
	sw, err := mgr.Client.SwarmInspect(ctx, client.SwarmInspectOptions{})
	if err != nil {
		t.Fatalf("swarm inspect: %v", err)
	}
	for _, w := range c.Nodes[1:] {
		if _, err := w.Client.SwarmJoin(ctx, client.SwarmJoinOptions{
			ListenAddr:    "0.0.0.0:2377",
			AdvertiseAddr: w.Addr.String(),
			RemoteAddrs:   []string{netip.AddrPortFrom(mgr.Addr, 2377).String()},
			JoinToken:     sw.Swarm.JoinTokens.Worker,
		}); err != nil {
			t.Fatalf("swarm join of %s: %v", w.Name, err)
		}
	}
	if err := c.waitReady(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("swarm cluster %s: %d nodes (%s), manager %s, registry %s (host) / %s (nodes), host at %s, up in %s",
		c.ID, n, c.StorageDriver, c.ManagerAPI, c.RegistryHost, c.RegistryNodes, c.HostAddr, time.Since(start).Round(time.Millisecond))
	return c
}

// startNode starts one node container and waits for its engine's API.
func (c *SwarmCluster) startNode(ctx context.Context, image, name string) (*SwarmNode, error) {
	apiPort := network.MustParsePort(swarmNodeAPIPort)
	id, err := c.run(ctx, name, "node", &container.Config{
		Image:    image,
		Hostname: name,
		// The API listens on the test network (and the host's loopback
		// through the published port) without TLS: the network is the
		// test's own and the published port is bound to 127.0.0.1.
		Cmd: []string{"sh", "-c", swarmNodeEntrypoint, "sh",
			"--host=unix:///var/run/docker.sock", "--host=tcp://0.0.0.0:2375", "--tls=false",
			"--storage-driver=" + c.StorageDriver,
			"--insecure-registry=" + c.RegistryNodes,
		},
		ExposedPorts: network.PortSet{apiPort: {}},
	}, privilegedNode(&container.HostConfig{
		CgroupnsMode: container.CgroupnsModePrivate,
		PortBindings: network.PortMap{apiPort: {{HostIP: netip.MustParseAddr("127.0.0.1")}}},
		// An anonymous volume: not on the container's own overlay (where
		// a nested overlay2 cannot live), removed with the container.
		Mounts: []mount.Mount{{Type: mount.TypeVolume, Target: "/var/lib/docker"}},
	}))
	if err != nil {
		return nil, err
	}
	port, err := c.hostPort(ctx, id, apiPort)
	if err != nil {
		return nil, err
	}
	node := &SwarmNode{Name: name, ContainerID: id, API: "tcp://127.0.0.1:" + port}
	ins, err := c.engine.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("inspect %s: %w", name, err)
	}
	if ep := ins.Container.NetworkSettings.Networks[c.Network]; ep != nil {
		node.Addr = ep.IPAddress
	}
	if !node.Addr.IsValid() {
		return nil, fmt.Errorf("%s has no address on %s", name, c.Network)
	}
	node.Client, err = client.New(client.WithHost(node.API), client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("client of %s: %w", name, err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, perr := node.Client.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true})
		cancel()
		if perr == nil {
			break
		}
		ins, err := c.engine.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if err != nil {
			return nil, fmt.Errorf("inspect %s: %w", name, err)
		}
		if !ins.Container.State.Running || time.Now().After(deadline) {
			return nil, fmt.Errorf("dockerd in %s does not answer (%v; running: %v); its log:\n%s", name, perr, ins.Container.State.Running, c.logs(id))
		}
		time.Sleep(250 * time.Millisecond)
	}
	return node, nil
}

// run creates and starts a container of the cluster on its network.
func (c *SwarmCluster) run(ctx context.Context, name, role string, cfg *container.Config, host *container.HostConfig) (string, error) {
	cfg.Labels = map[string]string{labelSwarmTest: role, labelSwarmCluster: c.ID}
	host.NetworkMode = container.NetworkMode(c.Network)
	res, err := c.engine.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name, Config: cfg, HostConfig: host})
	if err != nil {
		return "", fmt.Errorf("create %s: %w", name, err)
	}
	if _, err := c.engine.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		return "", fmt.Errorf("start %s: %w", name, err)
	}
	return res.ID, nil
}

// hostPort is the loopback port the engine published p of container id on.
func (c *SwarmCluster) hostPort(ctx context.Context, id string, p network.Port) (string, error) {
	ins, err := c.engine.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return "", fmt.Errorf("inspect: %w", err)
	}
	for _, b := range ins.Container.NetworkSettings.Ports[p] {
		if b.HostPort != "" {
			return b.HostPort, nil
		}
	}
	return "", fmt.Errorf("%s is not published", p)
}

// logs is the tail of a container's output, for failure messages.
func (c *SwarmCluster) logs(id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rc, err := c.engine.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: "30"})
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer rc.Close()
	var out bytes.Buffer
	_, _ = stdcopy.StdCopy(&out, &out, io.LimitReader(rc, 64<<10))
	return out.String()
}

// waitReady waits until the manager lists every node as ready, and
// records each node's swarm id (matched by hostname).
func (c *SwarmCluster) waitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		res, err := c.Manager.NodeList(ctx, client.NodeListOptions{})
		ready := 0
		if err == nil {
			byHost := map[string]string{}
			for _, n := range res.Items {
				if n.Status.State == swarm.NodeStateReady {
					ready++
					byHost[n.Description.Hostname] = n.ID
				}
			}
			for _, node := range c.Nodes {
				node.NodeID = byHost[node.Name]
			}
			if ready == len(c.Nodes) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d swarm nodes ready after %s (last error: %v)", ready, len(c.Nodes), limit, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// KillNode kills node i's container (docker kill): the node is lost, as a
// machine that loses power is, without leaving the swarm.
func (c *SwarmCluster) KillNode(t testing.TB, i int) {
	t.Helper()
	if _, err := c.engine.ContainerKill(context.Background(), c.Nodes[i].ContainerID, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		t.Fatalf("kill node %s: %v", c.Nodes[i].Name, err)
	}
}

// Exec runs argv in node i's container (not in a task: on the node
// itself, as its dockerd sees the network) and returns its output; a
// non-zero exit is an error.
func (c *SwarmCluster) Exec(ctx context.Context, i int, argv ...string) (string, error) {
	ex, err := c.engine.ExecCreate(ctx, c.Nodes[i].ContainerID, client.ExecCreateOptions{Cmd: argv, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return "", fmt.Errorf("exec in %s: %w", c.Nodes[i].Name, err)
	}
	att, err := c.engine.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return "", fmt.Errorf("exec in %s: %w", c.Nodes[i].Name, err)
	}
	defer att.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, io.LimitReader(att.Reader, 1<<20)); err != nil {
		return out.String(), fmt.Errorf("exec in %s: %w", c.Nodes[i].Name, err)
	}
	res, err := c.engine.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
	if err != nil {
		return out.String(), fmt.Errorf("exec in %s: %w", c.Nodes[i].Name, err)
	}
	if res.ExitCode != 0 {
		return out.String(), fmt.Errorf("%s in %s exited %d", argv[0], c.Nodes[i].Name, res.ExitCode)
	}
	return out.String(), nil
}

// NodeName is the container name (hostname) of the swarm node id, or id
// itself when it is not one of the cluster's.
func (c *SwarmCluster) NodeName(id string) string {
	for _, n := range c.Nodes {
		if n.NodeID == id {
			return n.Name
		}
	}
	return id
}

// NodeAddr is the test-network address of the swarm node id, which the
// host reaches directly (the network is a bridge on the host); the zero
// Addr when id is not one of the cluster's.
func (c *SwarmCluster) NodeAddr(id string) netip.Addr {
	for _, n := range c.Nodes {
		if n.NodeID == id {
			return n.Addr
		}
	}
	return netip.Addr{}
}

// ServiceTask is a task of a service as the manager reports it.
type ServiceTask struct {
	ID, NodeID string
	State      swarm.TaskState
	Desired    swarm.TaskState
	// Published are the ports the task's node published for it (host
	// mode), reached at the node's address.
	Published []uint32
}

// RunningTasks lists the tasks of service that the manager reports
// running and meant to run, sorted by node: where the service runs now.
func (c *SwarmCluster) RunningTasks(ctx context.Context, service string) ([]ServiceTask, error) {
	res, err := c.Manager.TaskList(ctx, client.TaskListOptions{Filters: make(client.Filters).Add("service", service).Add("desired-state", "running")})
	if err != nil {
		return nil, fmt.Errorf("tasks of %s: %w", service, err)
	}
	var out []ServiceTask
	for _, tk := range res.Items {
		if tk.Status.State == swarm.TaskStateRunning && tk.DesiredState == swarm.TaskStateRunning {
			st := ServiceTask{ID: tk.ID, NodeID: tk.NodeID, State: tk.Status.State, Desired: tk.DesiredState}
			for _, p := range tk.Status.PortStatus.Ports {
				st.Published = append(st.Published, p.PublishedPort)
			}
			out = append(out, st)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	return out, nil
}

// remove removes every object of the cluster: its containers (with their
// volumes), then its network.
func (c *SwarmCluster) remove(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, n := range c.Nodes {
		if n.Client != nil {
			n.Client.Close()
		}
	}
	res, err := c.engine.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", labelSwarmCluster+"="+c.ID)})
	if err != nil {
		t.Errorf("list the swarm cluster's containers: %v", err)
	}
	for _, ct := range res.Items {
		if _, err := c.engine.ContainerRemove(ctx, ct.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			t.Errorf("remove %s: %v", strings.Join(ct.Names, ","), err)
		}
	}
	if _, err := c.engine.NetworkRemove(ctx, c.Network, client.NetworkRemoveOptions{}); err != nil && !strings.Contains(err.Error(), "not found") {
		t.Errorf("remove network %s: %v", c.Network, err)
	}
}

// waitHTTP waits until url answers 200.
func waitHTTP(ctx context.Context, url string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
