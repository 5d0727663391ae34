package processtest

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"slipway/runtime/docker"
	"slipway/server/servertest"
)

// requireSwarmClusterTests gates the multi-node swarm tests: they start
// three nested dockerds and build their image from Debian packages on
// first use, which is too slow for every run of the suite.
func requireSwarmClusterTests(t *testing.T) {
	t.Helper()
	if os.Getenv("SLIPWAY_TEST_SWARM_CLUSTER") != "1" {
		t.Skip("the multi-node swarm tests start three nested Docker engines; set SLIPWAY_TEST_SWARM_CLUSTER=1 to run them")
	}
}

// TestSwarmClusterHarness proves the multi-node harness: a 3-node swarm
// whose nodes pull from the cluster's registry, a 3-replica service
// spread over the nodes, each task's port published in host mode and
// reached from the host at its node's address (as the swarm runtime
// publishes an agent: the kernel here has no IPVS, so the routing mesh
// does not work), then a worker node lost; the swarm must put the service
// back at 3 running tasks on the remaining nodes, each answering. The
// time it takes is logged.
func TestSwarmClusterHarness(t *testing.T) {
	requireSwarmClusterTests(t)
	testStart := time.Now()
	c := servertest.StartSwarmCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// A server on the host, listening on the host's address on the test
	// network, is reached from a node (as tasks reach PostgreSQL or Redis
	// that the test runs on the host).
	checkHostReachable(t, ctx, c, 2)

	// A tiny image built here (a static Go binary answering HTTP with its
	// hostname), pushed by the host's engine through the registry's host
	// address, run by the nodes by digest through its network address.
	repo := "slipway-swarmtest/whoami"
	digest := pushWhoamiImage(t, ctx, c, repo)
	image := c.RegistryNodes + "/" + repo + "@" + digest

	replicas := uint64(3)
	svc, err := c.Manager.ServiceCreate(ctx, client.ServiceCreateOptions{Spec: swarm.ServiceSpec{
		Annotations: swarm.Annotations{Name: "whoami-" + c.ID},
		TaskTemplate: swarm.TaskSpec{
			ContainerSpec: &swarm.ContainerSpec{Image: image},
			Placement:     &swarm.Placement{Preferences: []swarm.PlacementPreference{{Spread: &swarm.SpreadOver{SpreadDescriptor: "node.id"}}}},
		},
		Mode:         swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &replicas}},
		EndpointSpec: &swarm.EndpointSpec{Ports: []swarm.PortConfig{{Protocol: "tcp", TargetPort: 8080, PublishMode: swarm.PortConfigPublishModeHost}}},
	}})
	if err != nil {
		t.Fatalf("create the service: %v", err)
	}
	start := time.Now()
	tasks := waitTasks(t, ctx, c, svc.ID, 3, 3*time.Minute, "on 3 distinct nodes", func(ts []servertest.ServiceTask) bool { return len(nodesOf(ts)) == 3 })
	t.Logf("3 tasks running on 3 nodes %s, %s after the service's creation", nodeNames(c, tasks), time.Since(start).Round(time.Millisecond))
	checkAnswers(t, ctx, c, tasks)

	// Lose a worker that runs a task (with the spread, each node runs one).
	lost := c.Nodes[1]
	c.KillNode(t, 1)
	killed := time.Now()
	var downAt time.Duration
	recovered := waitTasks(t, ctx, c, svc.ID, 3, 3*time.Minute, "none on the lost "+lost.Name, func(ts []servertest.ServiceTask) bool {
		if downAt == 0 {
			if n, err := c.Manager.NodeInspect(ctx, lost.NodeID, client.NodeInspectOptions{}); err == nil && n.Node.Status.State == swarm.NodeStateDown {
				downAt = time.Since(killed)
			}
		}
		return !nodesOf(ts)[lost.NodeID]
	})
	recovery := time.Since(killed)
	nodes := nodesOf(recovered)
	for id := range nodes {
		if id != c.Nodes[0].NodeID && id != c.Nodes[2].NodeID {
			t.Errorf("after the loss a task runs on %s, not on a remaining node", c.NodeName(id))
		}
	}
	if len(nodes) != 2 {
		t.Errorf("after the loss the tasks run on %s, want both remaining nodes (spread)", nodeNames(c, recovered))
	}
	t.Logf("node %s killed: the manager marked it down after %s; 3 tasks running again on %s after %s", lost.Name, downAt.Round(time.Millisecond), nodeNames(c, recovered), recovery.Round(time.Millisecond))
	checkAnswers(t, ctx, c, recovered)
	t.Logf("total test time %s", time.Since(testStart).Round(time.Millisecond))
}

// waitTasks waits until the service runs want tasks and ok (what says
// what it checks) holds of them.
func waitTasks(t *testing.T, ctx context.Context, c *servertest.SwarmCluster, service string, want int, limit time.Duration, what string, ok func([]servertest.ServiceTask) bool) []servertest.ServiceTask {
	t.Helper()
	deadline := time.Now().Add(limit)
	var last []servertest.ServiceTask
	for {
		ts, err := c.RunningTasks(ctx, service)
		if err != nil {
			t.Fatal(err)
		}
		if ok(ts) && len(ts) == want {
			return ts
		}
		last = ts
		if time.Now().After(deadline) {
			t.Fatalf("after %s the service runs %d tasks on %s, want %d running, %s", limit, len(last), nodeNames(c, last), want, what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

var httpClient = &http.Client{Timeout: 2 * time.Second}

// waitAnswer waits (at most a minute) until url answers 200, and returns
// the answer.
func waitAnswer(t *testing.T, ctx context.Context, url string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		body, err := get(ctx, url)
		if err == nil {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not answer: %v", url, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func get(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	return string(b), nil
}

// checkHostReachable checks that node i reaches a TCP server the test
// listens with on c.HostAddr.
func checkHostReachable(t *testing.T, ctx context.Context, c *servertest.SwarmCluster, i int) {
	t.Helper()
	ln, err := net.Listen("tcp", netip.AddrPortFrom(c.HostAddr, 0).String())
	if err != nil {
		t.Fatalf("listen on the host's test network address: %v", err)
	}
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			got <- "accept: " + err.Error()
			return
		}
		defer conn.Close()
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		b, err := io.ReadAll(conn)
		if err != nil {
			got <- "read: " + err.Error()
			return
		}
		got <- string(b)
	}()
	if out, err := c.Exec(ctx, i, "bash", "-c", `echo "hello from $(hostname)" >/dev/tcp/`+c.HostAddr.String()+"/"+strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	select {
	case msg := <-got:
		if want := "hello from " + c.Nodes[i].Name + "\n"; msg != want {
			t.Fatalf("the host's server got %q, want %q", msg, want)
		}
		t.Logf("%s reaches the host at %s", c.Nodes[i].Name, ln.Addr())
	case <-time.After(30 * time.Second):
		t.Fatalf("nothing from %s reached the host at %s", c.Nodes[i].Name, ln.Addr())
	}
}

// checkAnswers checks that each task answers at its node's address on
// the port its node published for it, with its own hostname (distinct
// tasks, distinct answers). The address is the one the manager reports
// for the node (Status.Addr), which is how a client of the manager finds
// where a task is served on a multi-node swarm (127.0.0.1 only works on
// one node).
func checkAnswers(t *testing.T, ctx context.Context, c *servertest.SwarmCluster, tasks []servertest.ServiceTask) {
	t.Helper()
	seen := map[string]bool{}
	for _, tk := range tasks {
		node, err := c.Manager.NodeInspect(ctx, tk.NodeID, client.NodeInspectOptions{})
		if err != nil {
			t.Fatalf("inspect node %s: %v", tk.NodeID, err)
		}
		if addr := node.Node.Status.Addr; addr != c.NodeAddr(tk.NodeID).String() {
			t.Fatalf("the manager reports %s at %q, its test network address is %s", c.NodeName(tk.NodeID), addr, c.NodeAddr(tk.NodeID))
		}
		if len(tk.Published) != 1 {
			t.Fatalf("task %s on %s: published %v", tk.ID, c.NodeName(tk.NodeID), tk.Published)
		}
		url := fmt.Sprintf("http://%s:%d/", node.Node.Status.Addr, tk.Published[0])
		got := waitAnswer(t, ctx, url)
		if seen[got] {
			t.Errorf("%s answers %q as another task did", url, got)
		}
		seen[got] = true
		t.Logf("task %s on %s answers at %s: %s", tk.ID, c.NodeName(tk.NodeID), url, got)
	}
}

func nodesOf(ts []servertest.ServiceTask) map[string]bool {
	m := map[string]bool{}
	for _, tk := range ts {
		m[tk.NodeID] = true
	}
	return m
}

func nodeNames(c *servertest.SwarmCluster, ts []servertest.ServiceTask) string {
	var names []string
	for _, tk := range ts {
		names = append(names, c.NodeName(tk.NodeID))
	}
	return "[" + strings.Join(names, " ") + "]"
}

// pushWhoamiImage builds a one-file image (a static binary that answers
// HTTP on port 8080 with its hostname, the task's container) in the host's engine, pushes it to the cluster's registry and
// returns its manifest digest. The host's image goes at the test's end.
func pushWhoamiImage(t *testing.T, ctx context.Context, c *servertest.SwarmCluster, repo string) string {
	t.Helper()
	dir := t.TempDir()
	src := "package main\n\nimport (\n\t\"net/http\"\n\t\"os\"\n)\n\nfunc main() {\n\thost, _ := os.Hostname()\n\thttp.HandleFunc(\"/\", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(host)) })\n\tpanic(http.ListenAndServe(\":8080\", nil))\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module whoami\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	build := osexec.CommandContext(ctx, "go", "build", "-o", "whoami", ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the whoami binary: %v\n%s", err, out)
	}
	bin, err := os.ReadFile(filepath.Join(dir, "whoami"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "whoami", Mode: 0o755, Size: int64(len(bin)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(bin); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}

	e := servertest.DockerEngine(t)
	ref := c.RegistryHost + "/" + repo + ":" + c.ID
	res, err := e.ImageImport(ctx, client.ImageImportSource{Source: &buf, SourceName: "-"}, ref, client.ImageImportOptions{Changes: []string{`CMD ["/whoami"]`}})
	if err != nil {
		t.Fatalf("import the whoami image: %v", err)
	}
	if err := docker.StreamErr(res); err != nil {
		t.Fatalf("import the whoami image: %v", err)
	}
	res.Close()
	t.Cleanup(func() {
		if _, err := e.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true}); err != nil {
			t.Errorf("remove %s: %v", ref, err)
		}
	})
	push, err := e.ImagePush(ctx, ref, client.ImagePushOptions{RegistryAuth: "e30="})
	if err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	if err := push.Wait(ctx); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}

	// The digest as the registry has it, which the nodes pull by.
	req, _ := http.NewRequestWithContext(ctx, http.MethodHead, fmt.Sprintf("http://%s/v2/%s/manifests/%s", c.RegistryHost, repo, c.ID), nil)
	req.Header.Set("Accept", "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("the registry's manifest of %s: %v", ref, err)
	}
	resp.Body.Close()
	digest := resp.Header.Get("Docker-Content-Digest")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(digest, "sha256:") {
		t.Fatalf("the registry's manifest of %s: status %d, digest %q", ref, resp.StatusCode, digest)
	}
	return digest
}
