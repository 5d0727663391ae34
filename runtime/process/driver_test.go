package process

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"slipway/runtime"
	"slipway/runtime/sandbox"
)

var (
	standinOnce sync.Once
	standinBin  string
	standinErr  error
)

func standin(t *testing.T) string {
	t.Helper()
	standinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "standin-")
		if err != nil {
			standinErr = err
			return
		}
		standinBin = filepath.Join(dir, "standin")
		out, err := exec.Command("go", "build", "-o", standinBin, "./testdata/standin").CombinedOutput()
		if err != nil {
			standinErr = err
			t.Log(string(out))
		}
	})
	if standinErr != nil {
		t.Fatal(standinErr)
	}
	return standinBin
}

func tarball(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range files {
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		_, _ = tw.Write([]byte(body))
	}
	_ = tw.Close()
	_ = zw.Close()
	p := filepath.Join(dir, "src.tar.gz")
	if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMain lets the test binary serve as the sandbox launcher, which in
// production is slipway itself.
func TestMain(m *testing.M) {
	if os.Getenv(sandbox.SpecEnv) != "" {
		os.Exit(sandbox.Main())
	}
	os.Exit(m.Run())
}

func newDriver(t *testing.T) *Driver {
	d := &Driver{Bin: standin(t), Launcher: os.Args[0], Root: filepath.Join(t.TempDir(), "deployments"),
		UIDLow: 200000, UIDHigh: 265535, Gate: &runtime.Gate{}, Log: zerolog.Nop(),
		HealthTimeout: 3 * time.Second, StopGrace: 2 * time.Second}
	if err := d.Init(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.StopAll)
	return d
}

func spec(t *testing.T, rev, config string, extra map[string]string) runtime.Spec {
	files := map[string]string{"langgraph.json": config}
	for k, v := range extra {
		files[k] = v
	}
	return runtime.Spec{DeploymentID: "dep1", DeploymentName: "agent", RevisionID: rev, Source: "internal_source",
		TarballPath: tarball(t, t.TempDir(), files), GraphConfig: "langgraph.json", Env: map[string]string{"MY_SECRET": "s3cr3t"}}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func deploy(t *testing.T, d *Driver, s runtime.Spec) (string, error) {
	t.Helper()
	app, err := d.Build(context.Background(), s, io.Discard)
	if err != nil {
		return "", err
	}
	return d.Deploy(context.Background(), s, app, io.Discard)
}

// TestSecretsCannotReplaceSlipwaysSettings: a deployment's secrets named
// like the settings Slipway gives its agent (its address, its graph
// configuration) do not replace them; others reach the agent.
func TestSecretsCannotReplaceSlipwaysSettings(t *testing.T) {
	d := newDriver(t)
	s := spec(t, "rev1", `{"name":"one"}`, nil)
	s.Env["SLIPWAY_AGENT_ADDR"] = "0.0.0.0:1"
	s.Env["SLIPWAY_GRAPH_CONFIG"] = "/nonexistent/langgraph.json"
	ep, err := deploy(t, d, s)
	if err != nil {
		t.Fatalf("a revision with secrets named like Slipway's settings: %v", err)
	}
	if body := get(t, ep+"/ok"); !strings.Contains(body, `"one"`) || !strings.Contains(body, `"secret_seen":true`) {
		t.Fatalf("the agent: %s", body)
	}
}

// TestHandover: a second revision takes over the deployment's data (which
// only one process can hold); a failing third revision leaves the second
// serving; requests held at the gate meanwhile all succeed.
func TestHandover(t *testing.T) {
	d := newDriver(t)
	ep1, err := deploy(t, d, spec(t, "rev1", `{"name":"one"}`, nil))
	if err != nil {
		t.Fatal(err)
	}
	if body := get(t, ep1+"/ok"); !strings.Contains(body, `"one"`) || !strings.Contains(body, `"secret_seen":true`) {
		t.Fatalf("rev1: %s", body)
	}

	// A client keeps calling through the gate during the switch.
	var failures, calls atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = d.Gate.Wait(context.Background(), "dep1")
			ep, ok := d.Endpoint("dep1")
			calls.Add(1)
			resp, err := http.Get(ep + "/ok")
			if !ok || err != nil || resp.StatusCode != 200 {
				failures.Add(1)
			}
			if resp != nil {
				resp.Body.Close()
			}
		}
	}()
	ep2, err := deploy(t, d, spec(t, "rev2", `{"name":"two"}`, nil))
	if err != nil {
		t.Fatal(err)
	}
	if body := get(t, ep2+"/ok"); !strings.Contains(body, `"two"`) {
		t.Fatalf("rev2: %s", body)
	}
	if _, err := deploy(t, d, spec(t, "rev3", `{"unhealthy":true}`, nil)); err == nil {
		t.Fatal("unhealthy revision deployed")
	}
	ep, _ := d.Endpoint("dep1")
	if body := get(t, ep+"/ok"); !strings.Contains(body, `"two"`) {
		t.Fatalf("after failed rev3: %s", body)
	}
	close(stop)
	wg.Wait()
	// Requests that raced the handover may hit the stopping process; the gate
	// must keep that to the instant between Wait and the request.
	if f := failures.Load(); f > 2 {
		t.Fatalf("%d of %d calls failed during handovers", f, calls.Load())
	}
}

func TestCrashedAgentIsRestarted(t *testing.T) {
	d := newDriver(t)
	ep, err := deploy(t, d, spec(t, "rev1", `{"crash":true,"name":"phoenix"}`, nil))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for restarts := 0; restarts < 2; {
		if time.Now().After(deadline) {
			t.Fatal("agent not restarted")
		}
		resp, err := http.Get(ep + "/ok")
		if err == nil {
			resp.Body.Close()
			restarts++
			time.Sleep(300 * time.Millisecond) // let it crash
		} else {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func TestBuildFailures(t *testing.T) {
	d := newDriver(t)
	cases := []struct {
		name string
		s    runtime.Spec
		want string
	}{
		{"missing graph config", func() runtime.Spec { s := spec(t, "r1", "{}", nil); s.GraphConfig = "nope.json"; return s }(), "not in the uploaded source"},
		{"escaping graph config", func() runtime.Spec { s := spec(t, "r2", "{}", nil); s.GraphConfig = "../x.json"; return s }(), "leaves the source tree"},
		{"install command fails", func() runtime.Spec { s := spec(t, "r3", "{}", nil); s.InstallCommand = "exit 7"; return s }(), "install command failed"},
		{"node_version newer than the host's node", spec(t, "r4", `{"node_version": "99", "graphs": {}}`, nil), "node_version 99"},
	}
	if _, err := exec.LookPath("pnpm"); err != nil {
		cases = append(cases, struct {
			name string
			s    runtime.Spec
			want string
			// Without pnpm the install runs through npx in the version
			// packageManager names (TestJSInstallViaNPM); a value that is no
			// version is refused before anything runs, and not quoted.
		}{"pnpm lock without pnpm, packageManager not a version", spec(t, "r5", `{"graphs": {}}`,
			map[string]string{"package.json": `{"packageManager": "pnpm@latest; curl evil"}`, "pnpm-lock.yaml": ""}),
			"packageManager names pnpm in something that is not a version of pnpm"})
	}
	// A docker source builds nothing and is refused at deploy (DEPLOY_FAILED).
	docker := runtime.Spec{DeploymentID: "d", RevisionID: "r", Source: "internal_docker", ImageURI: "img:1"}
	if art, err := d.Build(context.Background(), docker, io.Discard); err != nil || art != "" {
		t.Fatalf("build of a docker source: %q, %v", art, err)
	}
	if _, err := d.Deploy(context.Background(), docker, "", io.Discard); err == nil || !strings.Contains(err.Error(), "docker runtime") {
		t.Fatalf("deploy of a docker source: %v", err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := d.Build(context.Background(), tc.s, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	// Install and build commands run with the deployment's environment.
	s := spec(t, "r4", "{}", map[string]string{"sub/.keep": ""})
	s.InstallCommand = `test "$MY_SECRET" = s3cr3t && touch installed`
	s.BuildCommand = `touch built`
	var log bytes.Buffer
	app, err := d.Build(context.Background(), s, &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	for _, f := range []string{"installed", "built"} {
		if _, err := os.Stat(filepath.Join(app, f)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
}

func TestRemoveLeavesNothing(t *testing.T) {
	d := newDriver(t)
	ep, err := deploy(t, d, spec(t, "rev1", `{}`, nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Remove(context.Background(), "dep1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d.Root, "dep1")); !os.IsNotExist(err) {
		t.Fatalf("files left: %v", err)
	}
	if _, err := http.Get(ep + "/ok"); err == nil {
		t.Fatal("agent still answering after Remove")
	}
	if _, ok := d.Endpoint("dep1"); ok {
		t.Fatal("endpoint still known")
	}
}

// TestDeployFailsWhenTheAgentExits: an agent that exits during the health
// wait fails the deploy at once, not after the health timeout, with its
// output in the deploy log.
func TestDeployFailsWhenTheAgentExits(t *testing.T) {
	d := newDriver(t)
	d.HealthTimeout = 30 * time.Second
	// A graph configuration that is not JSON fails the build already;
	// one the stand-in agent cannot read makes it exit at start.
	if _, err := d.Build(context.Background(), spec(t, "rev0", `not json`, nil), io.Discard); err == nil || !strings.Contains(err.Error(), "not a valid JSON object") {
		t.Fatalf("build of a configuration that is not JSON: %v", err)
	}
	s := spec(t, "rev1", `{"name": 5}`, nil)
	app, err := d.Build(context.Background(), s, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	start := time.Now()
	_, err = d.Deploy(context.Background(), s, app, &syncWriter{w: &log})
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "exited before it became healthy") {
		t.Fatalf("deploy: %v", err)
	}
	if took > 10*time.Second {
		t.Fatalf("the deploy failed after %v; the agent had exited at once", took)
	}
	if !strings.Contains(log.String(), "bad graph config") {
		t.Fatalf("the agent's output is not in the deploy log: %q", log.String())
	}
}

// TestHealthOfAServingAgent: CheckHealth passes for the serving revision;
// when its process is killed the watcher is told, CheckHealth says so, and
// once the supervisor restarted it CheckHealth passes again.
func TestHealthOfAServingAgent(t *testing.T) {
	d := newDriver(t)
	lost := make(chan string, 4)
	d.WatchHealth(context.Background(), func(dep string) { lost <- dep })
	if _, err := deploy(t, d, spec(t, "rev1", `{"name":"steady"}`, nil)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := d.CheckHealth(ctx, "dep1", "rev1"); err != nil {
		t.Fatalf("healthy agent: %v", err)
	}
	if err := d.CheckHealth(ctx, "dep1", "rev0"); err == nil {
		t.Fatal("CheckHealth passes for a revision that is not running")
	}
	d.mu.Lock()
	c := d.deps["dep1"].members[0]
	d.mu.Unlock()
	c.mu.Lock()
	pid := c.cmd.Process.Pid
	c.mu.Unlock()
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case dep := <-lost:
		if dep != "dep1" {
			t.Fatalf("lost %q", dep)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the watcher was not told the agent exited")
	}
	if err := d.CheckHealth(ctx, "dep1", "rev1"); err == nil {
		t.Fatal("CheckHealth passes right after the agent was killed")
	}
	for deadline := time.Now().Add(10 * time.Second); d.CheckHealth(ctx, "dep1", "rev1") != nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the agent was not restarted")
		}
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
