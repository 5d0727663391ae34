package processtest_test

import (
	"context"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/moby/moby/client"

	"slipway/runtime/docker"
	"slipway/server/servertest"
)

// drivers are the real runtimes the end-to-end tests run against.
var drivers = []string{"process", "docker"}

func requireRuntime(t testing.TB, driver string) { servertest.RequireRuntime(t, driver) }

func cleanupInstalls(t testing.TB, e *client.Client) { servertest.CleanupInstalls(t, e) }

// engine is a client of the local Docker engine, for inspecting what the
// docker runtime created.
func engine(t testing.TB) *client.Client { return servertest.DockerEngine(t) }

var (
	counterOnce sync.Once
	counterBin  []byte
	counterErr  error
)

// counterBinary is testdata/graphs/counter built static, to ship inside
// source archives as a command graph (the agent image has no libc).
func counterBinary(t testing.TB) string {
	t.Helper()
	counterOnce.Do(func() {
		dir, err := os.MkdirTemp("", "counter-")
		if err != nil {
			counterErr = err
			return
		}
		out := filepath.Join(dir, "counter")
		cmd := osexec.Command("go", "build", "-o", out, "./testdata/graphs/counter")
		cmd.Dir = servertest.RepoRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			counterErr = err
			counterBin = b
			return
		}
		counterBin, counterErr = os.ReadFile(out)
		os.RemoveAll(dir)
	})
	if counterErr != nil {
		t.Fatalf("build the counter graph: %v\n%s", counterErr, counterBin)
	}
	return string(counterBin)
}

// appFiles is a source tree with the echo built-in (as "agent", and as
// "echo" for the SDK suite) and the counter command graph; files under
// bin/ are packed executable.
func appFiles(t testing.TB, extraGraphs string) map[string]string {
	return map[string]string{
		"langgraph.json": `{"graphs": {"agent": {"builtin": "echo"}, "echo": {"builtin": "echo"}, "counter": {"command": ["./bin/counter"]}` + extraGraphs + `}}`,
		"bin/counter":    counterBinary(t),
	}
}

// leftovers lists what of a deployment remains in the runtime: docker
// objects carrying its label, or its process-runtime files.
func leftovers(t *testing.T, s *servertest.Server, driver, dep string) []string {
	t.Helper()
	var out []string
	for _, dir := range []string{filepath.Join(s.DataDir, "deployments", dep), filepath.Join(s.DataDir, "builds", dep),
		filepath.Join(s.DataDir, "uploads", dep)} {
		if _, err := os.Stat(dir); err == nil {
			out = append(out, "file "+dir)
		}
	}
	for _, pid := range agentProcesses(t, filepath.Join(s.DataDir, "deployments", dep)) {
		out = append(out, "process "+pid)
	}
	if driver != "docker" {
		return out
	}
	e := engine(t)
	ctx := context.Background()
	f := client.Filters{}.Add("label", docker.LabelDeployment+"="+dep)
	cs, err := e.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs.Items {
		out = append(out, "container "+c.Names[0])
	}
	vs, err := e.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs.Items {
		out = append(out, "volume "+v.Name)
	}
	ns, err := e.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns.Items {
		out = append(out, "network "+n.Name)
	}
	is, err := e.ImageList(ctx, client.ImageListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range is.Items {
		out = append(out, "image "+i.ID)
	}
	return out
}

// agentContainers lists a deployment's containers by role.
func agentContainers(t *testing.T, dep, role string) []string {
	t.Helper()
	f := client.Filters{}.Add("label", docker.LabelDeployment+"="+dep).Add("label", docker.LabelRole+"="+role)
	cs, err := engine(t).ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range cs.Items {
		ids = append(ids, c.ID)
	}
	return ids
}

// agentProcesses lists the pids of processes working in dir or below it:
// the process runtime runs each agent from its revision's directory.
func agentProcesses(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, e := range entries {
		if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err == nil &&
			(cwd == dir || strings.HasPrefix(cwd, dir+string(filepath.Separator))) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}
