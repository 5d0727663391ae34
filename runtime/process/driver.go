// Package process runs each deployment's agent server as a supervised
// child process of Slipway (`slipway agent`), for hosts without a Docker
// engine. The layout under Root:
//
//	<deployment id>/agent-data/          the agent's database, kept across revisions
//	<deployment id>/revisions/<rev>/app  the unpacked and built source of one revision
package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"slipway/runtime"
	"slipway/runtime/build"
)

// Driver is the process runtime.
type Driver struct {
	Bin  string // the slipway binary run as `slipway agent`
	Root string
	Gate *runtime.Gate
	Log  zerolog.Logger
	// HealthTimeout bounds how long a new revision may take to answer GET /ok.
	HealthTimeout time.Duration
	// StopGrace is how long an agent gets to finish after SIGTERM.
	StopGrace time.Duration

	mu   sync.Mutex
	deps map[string]*child // deployment → the running revision
}

func (d *Driver) Name() string { return "process" }

func (d *Driver) revDir(dep, rev string) string {
	return filepath.Join(d.Root, dep, "revisions", rev)
}

// needsDocker is why a docker-image source cannot run here.
func needsDocker(s runtime.Spec) error {
	return fmt.Errorf("%w: source %s needs the docker runtime (SLIPWAY_RUNTIME=docker with a Docker engine); the process runtime runs only internal_source deployments",
		runtime.ErrUnsupported, s.Source)
}

// Build unpacks the revision's archive and runs its install and build
// commands. A docker-image source has nothing to build; it is refused at
// deploy, where an image would be started.
func (d *Driver) Build(ctx context.Context, s runtime.Spec, log io.Writer) (string, error) {
	if s.Source != "internal_source" {
		fmt.Fprintf(log, "nothing to build for source %s\n", s.Source)
		return "", nil
	}
	app := filepath.Join(d.revDir(s.DeploymentID, s.RevisionID), "app")
	if _, err := os.Stat(filepath.Join(app, ".slipway-built")); err == nil {
		return app, nil // built before a restart: builds are deterministic per revision
	}
	if err := os.RemoveAll(app); err != nil {
		return "", fmt.Errorf("clear %s: %w", app, err)
	}
	fmt.Fprintf(log, "unpacking source archive\n")
	if err := build.Unpack(s.TarballPath, app, build.DefaultLimits); err != nil {
		return "", err
	}
	cfg, err := graphConfigPath(app, s.GraphConfig)
	if err != nil {
		return "", err
	}
	for _, step := range []struct{ name, cmd, dir string }{
		{"install", s.InstallCommand, app},
		{"build", s.BuildCommand, filepath.Dir(cfg)},
	} {
		if strings.TrimSpace(step.cmd) == "" {
			continue
		}
		fmt.Fprintf(log, "running %s command: %s\n", step.name, step.cmd)
		cmd := exec.CommandContext(ctx, "sh", "-c", step.cmd)
		cmd.Dir, cmd.Stdout, cmd.Stderr = step.dir, log, log
		cmd.Env = environ(s.Env)
		// Pdeathsig: a build must not outlive a Slipway that was killed.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("%s command failed: %w", step.name, err)
		}
	}
	if err := os.WriteFile(filepath.Join(app, ".slipway-built"), nil, 0o600); err != nil {
		return "", fmt.Errorf("mark build: %w", err)
	}
	return app, nil
}

// graphConfigPath resolves the graph configuration file inside app.
func graphConfigPath(app, rel string) (string, error) {
	clean, err := build.GraphConfigPath(rel)
	if err != nil {
		return "", err
	}
	p := filepath.Join(app, filepath.FromSlash(clean))
	st, err := os.Stat(p)
	if err != nil || !st.Mode().IsRegular() {
		return "", fmt.Errorf("graph configuration file %q is not in the uploaded source", rel)
	}
	return p, nil
}

// environ is the agent's environment: the deployment's secrets over a
// minimal base, never Slipway's own (which holds its master key).
func environ(env map[string]string) []string {
	out := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir(), "LANG=C.UTF-8"}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// Deploy hands the deployment over to this revision: new requests wait
// at the gate, the running revision stops, this one starts on the same
// agent database and must answer GET /ok. On failure the previous
// revision is started again.
func (d *Driver) Deploy(ctx context.Context, s runtime.Spec, app string, log io.Writer) (string, error) {
	if s.Source != "internal_source" {
		return "", needsDocker(s)
	}
	d.mu.Lock()
	if d.deps == nil {
		d.deps = map[string]*child{}
	}
	prev := d.deps[s.DeploymentID]
	d.mu.Unlock()
	if prev != nil && prev.rev == s.RevisionID && prev.healthy() {
		return prev.endpoint, nil
	}
	resume := d.Gate.Pause(s.DeploymentID)
	defer resume()
	if prev != nil {
		fmt.Fprintf(log, "stopping revision %s\n", prev.rev)
		prev.stop(d.grace())
	}
	c, err := d.start(s, app, log)
	if err == nil {
		err = c.waitHealthy(ctx, d.healthTimeout())
		if err != nil {
			c.stop(d.grace())
		}
	}
	if err != nil {
		if prev != nil {
			fmt.Fprintf(log, "restarting revision %s\n", prev.rev)
			if again, rerr := d.start(prev.spec, prev.app, io.Discard); rerr == nil && again.waitHealthy(context.Background(), d.healthTimeout()) == nil {
				d.set(s.DeploymentID, again)
			}
		}
		return "", err
	}
	d.set(s.DeploymentID, c)
	fmt.Fprintf(log, "revision %s is serving on %s\n", s.RevisionID, c.endpoint)
	return c.endpoint, nil
}

func (d *Driver) set(dep string, c *child) {
	d.mu.Lock()
	d.deps[dep] = c
	d.mu.Unlock()
}

func (d *Driver) grace() time.Duration {
	if d.StopGrace > 0 {
		return d.StopGrace
	}
	return 10 * time.Second
}

func (d *Driver) healthTimeout() time.Duration {
	if d.HealthTimeout > 0 {
		return d.HealthTimeout
	}
	return 30 * time.Second
}

// Stop stops the revision if it is the one running, and removes its files.
func (d *Driver) Stop(_ context.Context, dep, rev string) error {
	d.mu.Lock()
	c := d.deps[dep]
	if c != nil && c.rev == rev {
		delete(d.deps, dep)
	} else {
		c = nil
	}
	d.mu.Unlock()
	if c != nil {
		c.stop(d.grace())
	}
	if err := os.RemoveAll(d.revDir(dep, rev)); err != nil {
		return fmt.Errorf("remove revision files: %w", err)
	}
	return nil
}

// Remove stops the deployment and deletes all its files, its agent
// database included.
func (d *Driver) Remove(_ context.Context, dep string) error {
	d.mu.Lock()
	c := d.deps[dep]
	delete(d.deps, dep)
	d.mu.Unlock()
	if c != nil {
		c.stop(d.grace())
	}
	if err := os.RemoveAll(filepath.Join(d.Root, dep)); err != nil {
		return fmt.Errorf("remove deployment files: %w", err)
	}
	return nil
}

// Endpoint is where the deployment's running revision listens.
func (d *Driver) Endpoint(dep string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.deps[dep]
	if c == nil {
		return "", false
	}
	return c.endpoint, true
}

// StopAll stops every agent (Slipway is shutting down).
func (d *Driver) StopAll() {
	d.mu.Lock()
	all := d.deps
	d.deps = map[string]*child{}
	d.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range all {
		wg.Add(1)
		go func(c *child) { defer wg.Done(); c.stop(d.grace()) }(c)
	}
	wg.Wait()
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// start launches the revision's agent under a supervisor.
func (d *Driver) start(s runtime.Spec, app string, log io.Writer) (*child, error) {
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("pick a port: %w", err)
	}
	cfg, err := graphConfigPath(app, s.GraphConfig)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(d.Root, s.DeploymentID, "agent-data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, fmt.Errorf("agent data directory: %w", err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	env := append(environ(s.Env),
		"SLIPWAY_AGENT_ADDR="+addr, "SLIPWAY_AGENT_DATA_DIR="+data, "SLIPWAY_GRAPH_CONFIG="+cfg,
		"SLIPWAY_LOG_FORMAT=json")
	c := &child{rev: s.RevisionID, spec: s, app: app, endpoint: "http://" + addr, bin: d.Bin, env: env,
		log: d.Log.With().Str("deployment_id", s.DeploymentID).Str("revision_id", s.RevisionID).Logger(),
		out: log, done: make(chan struct{})}
	go c.supervise()
	return c, nil
}

// child is one supervised agent process: restarted with back-off when it
// exits on its own, until stop.
type child struct {
	rev, app, endpoint, bin string
	spec                    runtime.Spec
	env                     []string
	log                     zerolog.Logger
	out                     io.Writer

	mu       sync.Mutex
	cmd      *exec.Cmd
	stopping bool
	done     chan struct{}
}

func (c *child) supervise() {
	defer close(c.done)
	backoff := time.Second
	for {
		c.mu.Lock()
		if c.stopping {
			c.mu.Unlock()
			return
		}
		cmd := exec.Command(c.bin, "agent")
		cmd.Dir, cmd.Env = c.app, c.env
		cmd.Stdout, cmd.Stderr = c.out, c.out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		err := cmd.Start()
		if err == nil {
			c.cmd = cmd
		}
		c.mu.Unlock()
		started := time.Now()
		if err == nil {
			err = cmd.Wait()
		}
		c.mu.Lock()
		stopping := c.stopping
		c.cmd = nil
		c.out = io.Discard // build/deploy log is only for the first start
		c.mu.Unlock()
		if stopping {
			return
		}
		if time.Since(started) > time.Minute {
			backoff = time.Second
		}
		c.log.Warn().Err(err).Dur("restart_in", backoff).Msg("agent exited; restarting")
		time.Sleep(backoff)
		if backoff < 30*time.Second {
			backoff *= 2
		}
	}
}

// stop ends the process group with SIGTERM, then SIGKILL after grace.
func (c *child) stop(grace time.Duration) {
	c.mu.Lock()
	c.stopping = true
	cmd := c.cmd
	c.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-c.done:
			return
		case <-time.After(grace):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	<-c.done
}

func (c *child) healthy() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", c.endpoint+"/ok", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// waitHealthy polls GET /ok until it answers 200.
func (c *child) waitHealthy(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if c.healthy() {
			return nil
		}
		select {
		case <-c.done:
			return errors.New("the agent exited before it became healthy")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("health check GET /ok did not pass within %v", timeout)
		}
	}
}
