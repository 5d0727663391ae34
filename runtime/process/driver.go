// Package process runs each deployment's agent server as a supervised
// child process of Slipway (`slipway agent`), for hosts without a Docker
// engine. The layout under Root:
//
//	uids.json                              deployment → its own uid (when Slipway is root)
//	<deployment id>/                       Slipway's (0711 when root)
//	<deployment id>/agent-data/            the agent's database, kept across revisions
//	<deployment id>/agent-data/replica-<name>/  a scaled revision's replica's data (replicas.go)
//	<deployment id>/home/, tmp/            the deployment's HOME and TMPDIR
//	<deployment id>/revisions/<rev>/       Slipway's: the built marker
//	<deployment id>/revisions/<rev>/app/   the unpacked and built source of one revision
//
// Everything a deployment's code runs (install and build commands, the
// agent, its command graphs) goes through the sandbox launcher. When
// Slipway is root the deployment's trees (agent-data, home, tmp, app) are
// owned by the deployment's uid and every directory Slipway itself writes
// into stays root's, so that nothing the deployment plants there (a
// symlink) can redirect a write made as root.
package process

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"slipway/runtime"
	"slipway/runtime/build"
	"slipway/runtime/sandbox"
)

// Driver is the process runtime. Call Init before anything else.
type Driver struct {
	Bin string // the slipway binary run as `slipway agent`
	// Launcher is the binary implementing sandbox.Subcommand (slipway).
	Launcher string
	// Root is <data dir>/deployments; DataDir is what is hidden from
	// deployment code.
	Root    string
	DataDir string
	// UIDLow and UIDHigh bound the deployments' uids (Slipway as root).
	UIDLow, UIDHigh int
	Gate            *runtime.Gate
	Log             zerolog.Logger
	// HealthTimeout bounds how long a new revision may take to answer GET /ok.
	HealthTimeout time.Duration
	// StopGrace is how long an agent gets to finish after SIGTERM.
	StopGrace time.Duration
	// Limits are the deployments' default resource limits (limits.go).
	Limits Limits

	mu   sync.Mutex
	deps map[string]*group // deployment → the running revision's agents (replicas.go)
	lost func(dep string)  // told when a serving agent exits (WatchHealth)

	pyOnce  sync.Once
	pythons []build.Interpreter // see interpreters

	sandbox   sandbox.Launcher
	uids      *uidTable        // nil unless deployments get uids of their own
	cgroups   *sandbox.Cgroups // nil: no resource limits (limits.go)
	isolation runtime.Isolation
	output    runtime.Output // agents' stdout and stderr; see output.go
}

func (d *Driver) Name() string { return "process" }

// Init resolves the directories, finds out how deployment code can be
// contained on this host (sandbox.Probe) and loads the uid table.
func (d *Driver) Init() error {
	if d.DataDir == "" {
		d.DataDir = filepath.Dir(d.Root)
	}
	for _, p := range []*string{&d.Root, &d.DataDir} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return fmt.Errorf("process runtime: %w", err)
		}
		*p = abs
	}
	if err := os.MkdirAll(d.Root, 0o700); err != nil {
		return fmt.Errorf("process runtime: %w", err)
	}
	// Symlinks resolved: the launcher compares and mounts real paths.
	for _, p := range []*string{&d.Root, &d.DataDir} {
		real, err := filepath.EvalSymlinks(*p)
		if err != nil {
			return fmt.Errorf("process runtime: %w", err)
		}
		*p = real
	}
	if d.Root == d.DataDir || !strings.HasPrefix(d.Root, d.DataDir+string(filepath.Separator)) {
		return fmt.Errorf("process runtime: %s is not inside the data directory %s", d.Root, d.DataDir)
	}
	mode, abi, notes := sandbox.Probe(d.Launcher, d.DataDir, d.Root)
	d.sandbox = sandbox.Launcher{Bin: d.Launcher, Mode: mode}
	if mode.Privileged() {
		if d.UIDLow <= 0 || d.UIDHigh < d.UIDLow {
			return fmt.Errorf("process runtime: no uid range for deployments (SLIPWAY_SANDBOX_UID_RANGE)")
		}
		uids, err := loadUIDs(filepath.Join(d.Root, "uids.json"), d.UIDLow, d.UIDHigh, d.uidInUse)
		if err != nil {
			return err
		}
		d.uids = uids
		if err := d.agentBinary(); err != nil {
			return err
		}
		// Traversable, not listable: a deployment's uid walks down to its
		// own directory and learns no other deployment's id on the way.
		for _, dir := range []string{d.DataDir, d.Root} {
			if err := os.Chmod(dir, 0o711); err != nil {
				return fmt.Errorf("process runtime: %w", err)
			}
		}
	}
	i := runtime.Isolation{}
	i.Mode, i.Guarantees, i.Missing = sandbox.Isolation(mode, abi, notes)
	d.initLimits(&i, mode, abi)
	if i.Missing == nil {
		i.Missing = []string{}
	}
	d.isolation = i
	return nil
}

// agentBinary makes sure deployments' uids may execute the agent binary.
// A binary built under a umask of 0077 (`go run` as root with systemd's
// UMask) is 0700, which only root may execute: run a 0755 copy of it,
// kept in the root-owned runtime directory, instead.
func (d *Driver) agentBinary() error {
	st, err := os.Stat(d.Bin)
	if err != nil {
		return fmt.Errorf("process runtime: agent binary: %w", err)
	}
	if st.Mode().Perm()&0o001 != 0 {
		return nil
	}
	raw, err := os.ReadFile(d.Bin)
	if err != nil {
		return fmt.Errorf("process runtime: agent binary: %w", err)
	}
	cp := filepath.Join(d.Root, "slipway-agent")
	tmp := cp + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o755); err != nil {
		return fmt.Errorf("process runtime: copy the agent binary: %w", err)
	}
	// WriteFile's mode is subject to the umask this fix is about.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("process runtime: copy the agent binary: %w", err)
	}
	if err := os.Rename(tmp, cp); err != nil {
		return fmt.Errorf("process runtime: copy the agent binary: %w", err)
	}
	d.Log.Info().Str("binary", d.Bin).Str("copy", cp).Msg("the slipway binary is not executable by deployments' uids; agents run a 0755 copy")
	d.Bin = cp
	return nil
}

// Isolation is what contains deployment code here, as probed by Init.
func (d *Driver) Isolation() runtime.Isolation { return d.isolation }

func (d *Driver) depDir(dep string) string { return filepath.Join(d.Root, dep) }

// owner is the uid and gid the deployment's code runs as; -1 when it runs
// as Slipway's own user.
func (d *Driver) owner(dep string) (int, error) {
	if d.uids == nil {
		return -1, nil
	}
	return d.uids.get(dep)
}

// prepare creates the deployment's directory and its own trees (agent
// data, HOME, TMPDIR), owned by uid when it is not -1.
func (d *Driver) prepare(dep string, uid int) error {
	dir := d.depDir(dep)
	if err := mkdirMode(dir, 0o711); err != nil {
		return err
	}
	for _, sub := range []string{"agent-data", "home", "tmp"} {
		p := filepath.Join(dir, sub)
		if err := mkdirMode(p, 0o700); err != nil {
			return err
		}
		if err := chownTree(p, uid); err != nil {
			return err
		}
	}
	return nil
}

// mkdirMode creates dir (and its parents) and sets its mode whatever the
// umask; it refuses a dir that is a symlink.
func mkdirMode(dir string, mode os.FileMode) error {
	if err := os.MkdirAll(dir, mode); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if err := os.Chmod(dir, mode); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return nil
}

func (d *Driver) revDir(dep, rev string) string {
	return filepath.Join(d.Root, dep, "revisions", rev)
}

// needsDocker is why a docker-image source cannot run here.
func needsDocker(s runtime.Spec) error {
	return fmt.Errorf("%w: source %s needs the docker runtime (SLIPWAY_RUNTIME=docker with a Docker engine); the process runtime runs only internal_source deployments",
		runtime.ErrUnsupported, s.Source)
}

// buildRevision unpacks the revision's archive, reads its project and
// runs its install and build commands (Build, in errors.go, says its
// errors in the project's terms). A docker-image source has nothing to
// build; it is refused at deploy, where an image would be started.
//
// The order is what keeps deployment code from redirecting Slipway: the
// source is unpacked into a directory only Slipway can write, everything
// Slipway needs of it is read from there through one build.Tree
// (readRevision), and only then is the tree handed to the deployment's
// uid, from the same descriptors; after that Slipway reads nothing in it.
func (d *Driver) buildRevision(ctx context.Context, s runtime.Spec, log io.Writer) (string, error) {
	if s.Source != "internal_source" {
		fmt.Fprintf(log, "nothing to build for source %s\n", s.Source)
		return "", nil
	}
	rev := d.revDir(s.DeploymentID, s.RevisionID)
	app := filepath.Join(rev, "app")
	// The marker is in the revision's directory, which is Slipway's: the
	// deployment's code cannot forge it, nor turn it into a symlink.
	marker := filepath.Join(rev, "built")
	if _, err := os.Lstat(marker); err == nil {
		return app, nil // built before a restart: builds are deterministic per revision
	}
	uid, err := d.owner(s.DeploymentID)
	if err != nil {
		return "", err
	}
	if err := d.prepare(s.DeploymentID, uid); err != nil {
		return "", err
	}
	if err := d.applyLimits(s, false); err != nil {
		return "", err
	}
	for _, dir := range []string{filepath.Dir(rev), rev} {
		if err := mkdirMode(dir, 0o711); err != nil {
			return "", err
		}
	}
	if err := os.RemoveAll(app); err != nil {
		return "", fmt.Errorf("clear the source directory: %w", build.PlainError(err))
	}
	// 0700 and Slipway's before the first file lands: in uid mode (no
	// mount namespace) no other deployment, and no code of this one, can
	// read or change the source while Slipway unpacks and reads it.
	if err := mkdirMode(app, 0o700); err != nil {
		return "", err
	}
	fmt.Fprintf(log, "==> unpack the source archive\n")
	unpacked := time.Now()
	if err := build.Unpack(s.TarballPath, app, build.DefaultLimits); err != nil {
		return "", err
	}
	fmt.Fprintf(log, "<== unpack the source archive done in %s\n", took(unpacked))
	tree, err := build.OpenTree(app)
	if err != nil {
		return "", fmt.Errorf("the unpacked source: %w", err)
	}
	defer tree.Close()
	proj, err := readRevision(tree, s.GraphConfig, strings.TrimSpace(s.InstallCommand))
	if err != nil {
		return "", err
	}
	proj.notes(log)
	if err := proj.keep(rev); err != nil {
		return "", err
	}
	// Handed over from the descriptors the reads used; nothing below
	// reads the tree again.
	if err := handOver(tree, "the source", uid); err != nil {
		return "", err
	}
	tree.Close()
	dir := filepath.Join(app, filepath.FromSlash(proj.dir))
	env := environ(d.depDir(s.DeploymentID), s.Env)
	if proj.plan != nil {
		if err := d.buildVenv(ctx, s, uid, dir, proj.plan, proj.proj.PythonVersion, env, log); err != nil {
			return "", err
		}
		env = venvEnviron(env, filepath.Join(rev, venvDir))
	}
	install, installDir, err := jsProject(proj, s.InstallCommand, log)
	if err != nil {
		return "", err
	}
	if installDir == "" {
		installDir = app
	} else {
		installDir = filepath.Join(app, filepath.FromSlash(installDir))
	}
	for _, step := range []struct{ name, cmd, dir string }{
		{"install command", install, installDir},
		{"build command", s.BuildCommand, dir},
	} {
		if strings.TrimSpace(step.cmd) == "" {
			continue
		}
		// The launcher is a new session and dies with Slipway; on cancel
		// its whole process group goes.
		if err := d.step(ctx, log, step.name, s, uid, step.dir, []string{"sh", "-c", step.cmd}, env); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		return "", fmt.Errorf("mark build: %w", build.PlainError(err))
	}
	return app, nil
}

// jsProject checks the graph configuration's node_version against this
// host's node, and picks the install of a JavaScript project (a
// package.json beside the configuration) when the revision names no
// install_command: the package manager its lock file names, run in the
// project's directory. It returns the install command and its directory
// relative to the source ("" for the source's root, where an
// install_command runs).
func jsProject(proj *revisionProject, installCommand string, log io.Writer) (string, string, error) {
	if want := proj.node; want != "" {
		have, err := build.HostNodeVersion()
		if err != nil {
			return "", "", fmt.Errorf("node_version %s: %w", want, err)
		}
		if err := build.CheckNodeVersion(want, have); err != nil {
			return "", "", err
		}
		fmt.Fprintf(log, "node_version %s: this host runs node %s\n", want, have)
	}
	if strings.TrimSpace(installCommand) != "" {
		return installCommand, "", nil
	}
	if proj.jsErr != nil || !proj.jsFound {
		return "", "", proj.jsErr
	}
	why := "no lock file"
	if proj.js.Lock != "" {
		why = proj.js.Lock
	}
	if proj.js.Note != "" {
		why += "; " + proj.js.Note
	}
	fmt.Fprintf(log, "JavaScript project: installing its dependencies with %s (%s)\n", proj.js.Command, why)
	return proj.js.Command, proj.dir, nil
}

// job is a sandbox job of the deployment run as uid from dir.
func (d *Driver) job(dep string, uid int, dir string, argv, env []string) sandbox.Job {
	return sandbox.Job{DataDir: d.DataDir, DeployDir: d.depDir(dep), UID: uid, GID: uid, Dir: dir, Argv: argv, Env: env,
		Cgroups: d.cgroups.Dirs(dep)}
}

// environ is the agent's environment: the deployment's secrets over a
// minimal base, never Slipway's own (which holds its master key). HOME and
// TMPDIR are the deployment's own.
func environ(depDir string, env map[string]string) []string {
	out := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(depDir, "home"),
		"TMPDIR=" + filepath.Join(depDir, "tmp"), "LANG=C.UTF-8"}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// deploy hands the deployment over to this revision: new requests wait
// at the gate, the running revision stops, this one starts on the same
// agent database and must answer GET /ok. On failure the previous
// revision is started again.
func (d *Driver) deploy(ctx context.Context, s runtime.Spec, app string, log io.Writer) (string, error) {
	if s.Source != "internal_source" {
		return "", needsDocker(s)
	}
	d.mu.Lock()
	if d.deps == nil {
		d.deps = map[string]*group{}
	}
	prev := d.deps[s.DeploymentID]
	d.mu.Unlock()
	if prev != nil && prev.rev == s.RevisionID && len(prev.members) == len(s.Scale.Replicas()) && prev.healthy() {
		return prev.endpoint(), nil
	}
	// The whole group is replaced behind the gate: the old agents stop
	// before the new ones start, as an unscaled deployment's bbolt file
	// admits one process at a time; requests wait at the gate meanwhile.
	resume := d.Gate.Pause(s.DeploymentID)
	defer resume()
	if prev != nil {
		fmt.Fprintf(log, "stopping revision %s\n", prev.rev)
		prev.stop(d.grace())
	}
	g, err := d.startGroup(s, app, log)
	if err == nil {
		err = g.waitHealthy(ctx, d.healthTimeout())
		if err != nil {
			g.stop(d.grace())
		}
	}
	if err != nil {
		if prev != nil {
			fmt.Fprintf(log, "restarting revision %s\n", prev.rev)
			if again, rerr := d.startGroup(prev.spec, prev.app, io.Discard); rerr == nil {
				if again.waitHealthy(context.Background(), d.healthTimeout()) == nil {
					d.set(s.DeploymentID, again)
				} else {
					again.stop(d.grace())
				}
			}
		}
		return "", err
	}
	d.set(s.DeploymentID, g)
	if g.scaled() {
		for _, c := range g.members {
			fmt.Fprintf(log, "replica %s (role %s) is serving on %s\n", c.replica.Name, c.replica.Role, c.endpoint)
		}
	}
	fmt.Fprintf(log, "revision %s is serving on %s\n", s.RevisionID, g.endpoint())
	return g.endpoint(), nil
}

func (d *Driver) set(dep string, g *group) {
	d.mu.Lock()
	d.deps[dep] = g
	d.mu.Unlock()
}

func (d *Driver) grace() time.Duration { return cmp.Or(d.StopGrace, runtime.DefaultStopGrace) }

func (d *Driver) healthTimeout() time.Duration {
	return cmp.Or(d.HealthTimeout, runtime.DefaultHealthTimeout)
}

// Stop stops the revision if it is the one running. A built revision's
// files (its source and virtualenv) stay until the deployment is removed,
// so that a rollback to it starts it again without a rebuild, as the
// docker runtime keeps revision images; an unbuilt one's go.
func (d *Driver) Stop(_ context.Context, dep, rev string) error {
	d.mu.Lock()
	g := d.deps[dep]
	if g != nil && g.rev == rev {
		delete(d.deps, dep)
	} else {
		g = nil
	}
	d.mu.Unlock()
	if g != nil {
		g.stop(d.grace())
	}
	if _, err := os.Lstat(filepath.Join(d.revDir(dep, rev), "built")); err == nil {
		return nil
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
	g := d.deps[dep]
	delete(d.deps, dep)
	d.mu.Unlock()
	if g != nil {
		g.stop(d.grace())
	}
	if err := d.release(dep); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(d.Root, dep)); err != nil {
		return fmt.Errorf("remove deployment files: %w", err)
	}
	if d.uids != nil {
		// Only now that it owns nothing may the uid go to another deployment.
		return d.uids.free(dep)
	}
	return nil
}

// Endpoint is where the deployment's running revision listens, with the
// agent's token as the URL's password (see runtime.Driver): of a scaled
// revision, the first API replica that is up (Endpoints has them all).
func (d *Driver) Endpoint(dep string) (string, bool) {
	d.mu.Lock()
	g := d.deps[dep]
	d.mu.Unlock()
	if g == nil {
		return "", false
	}
	c := g.members[0]
	for _, m := range g.members {
		if m.replica.API() && m.up.Load() {
			c = m
			break
		}
	}
	return c.url()
}

// exited tells the health watcher that dep's serving agent exited.
func (d *Driver) exited(dep string) {
	d.mu.Lock()
	lost := d.lost
	d.mu.Unlock()
	if lost != nil {
		lost(dep)
	}
}

// WatchHealth has lost called whenever a serving agent process exits on
// its own (runtime.HealthNotifier); the supervisor restarts it.
func (d *Driver) WatchHealth(_ context.Context, lost func(dep string)) {
	d.mu.Lock()
	d.lost = lost
	d.mu.Unlock()
}

// CheckHealth reports whether revision rev of dep is running and answers
// GET /ok, with the agent's token (runtime.HealthChecker).
func (d *Driver) CheckHealth(_ context.Context, dep, rev string) error {
	d.mu.Lock()
	g := d.deps[dep]
	d.mu.Unlock()
	if g == nil {
		return errors.New("no agent process of the deployment is running")
	}
	if g.rev != rev {
		return fmt.Errorf("the running agent is of revision %s", g.rev)
	}
	if g.scaled() {
		return g.checkGroup()
	}
	c := g.members[0]
	if up, err := c.running(); !up {
		return fmt.Errorf("the agent process exited (%v)", err)
	}
	if !c.healthy() {
		return errors.New("the agent process runs but GET /ok did not answer 200")
	}
	return nil
}

// StopAll stops every agent (Slipway is shutting down).
func (d *Driver) StopAll() {
	d.mu.Lock()
	all := d.deps
	d.deps = map[string]*group{}
	d.mu.Unlock()
	var wg sync.WaitGroup
	for _, g := range all {
		wg.Add(1)
		go func(g *group) { defer wg.Done(); g.stop(d.grace()) }(g)
	}
	wg.Wait()
	d.cgroups.Close()
}

// start launches one agent of the revision (replica r) under a supervisor,
// listening on port (freePorts).
func (d *Driver) start(s runtime.Spec, app string, r runtime.Replica, port int, log io.Writer) (*child, error) {
	cfg, err := graphConfigPath(app, s.GraphConfig)
	if err != nil {
		return nil, err
	}
	uid, err := d.owner(s.DeploymentID)
	if err != nil {
		return nil, err
	}
	if err := d.prepare(s.DeploymentID, uid); err != nil {
		return nil, err
	}
	if err := d.applyLimits(s, true); err != nil {
		return nil, err
	}
	data, err := d.replicaDataDir(s.DeploymentID, r, uid)
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	// Every agent shares the host's loopback, so any deployment's code can
	// reach any agent's port: the agent answers only requests that carry
	// this token, which only Slipway and the agent know (token.go).
	token := rand.Text()
	env, err := d.projectEnviron(s, environ(d.depDir(s.DeploymentID), s.Env))
	if err != nil {
		return nil, err
	}
	own := []string{"SLIPWAY_AGENT_ADDR=" + addr, "SLIPWAY_AGENT_DATA_DIR=" + data, "SLIPWAY_GRAPH_CONFIG=" + cfg,
		"SLIPWAY_LOG_FORMAT=json", tokenEnv}
	for k, v := range s.AgentEnv {
		own = append(own, k+"="+v)
	}
	for k, v := range r.Env {
		own = append(own, k+"="+v)
	}
	env = runtime.Settle(env, own)
	job := d.revisionJob(s, uid, true, app, []string{d.Bin, "agent"}, env)
	job.KeepFDs = []int{tokenFD}
	lg := d.Log.With().Str("deployment_id", s.DeploymentID).Str("revision_id", s.RevisionID)
	if r.Name != "" {
		lg = lg.Str("replica", r.Name)
	}
	c := &child{rev: s.RevisionID, spec: s, app: app, replica: r, endpoint: "http://" + addr, token: token,
		command: func() (*exec.Cmd, error) {
			cmd, err := d.sandbox.Command(context.Background(), job)
			if err == nil {
				err = passToken(cmd, token)
			}
			return cmd, err
		},
		log: lg.Logger(),
		out: log, output: replicaOutput(d.capture(), r), done: make(chan struct{}), stopc: make(chan struct{}),
		onExit: func() { d.exited(s.DeploymentID) }}
	go c.supervise()
	return c, nil
}

// child is one supervised agent process: restarted with back-off when it
// exits on its own once it has been healthy, until stop. One that exits
// before it ever answered GET /ok is not restarted: the deploy fails at
// once with its output in the deploy log.
type child struct {
	rev, app, endpoint string
	token              string // the agent's runtime.AgentTokenHeader; never logged
	spec               runtime.Spec
	replica            runtime.Replica
	// up: it answered its last health check (waitHealthy, CheckHealth, or
	// the probe after a restart) and has not exited since; the proxy
	// sends requests only to API replicas that are up (Endpoints).
	up      atomic.Bool
	command func() (*exec.Cmd, error) // a new sandboxed agent process
	log     zerolog.Logger
	out     io.Writer
	output  runtime.Output // nil: the first start's output goes to out

	onExit func() // the agent exited on its own after serving

	mu       sync.Mutex
	cmd      *exec.Cmd
	stopping bool
	served   bool  // it answered GET /ok once: exits are restarted from then on
	exitErr  error // how the last run ended
	startErr tail  // the end of its stderr before it was first healthy
	done     chan struct{}
	stopc    chan struct{} // closed by stop: ends a back-off wait
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
		cmd, err := c.command()
		closeStreams := func() {}
		if err == nil {
			cmd.Stdout, cmd.Stderr, closeStreams = c.streams()
			err = cmd.Start()
			closePassed(cmd)
		}
		if err == nil {
			c.cmd = cmd
			if c.served {
				go c.probeUp(cmd) // a restart: up again once it answers
			}
		}
		c.mu.Unlock()
		started := time.Now()
		if err == nil {
			err = cmd.Wait()
		}
		closeStreams()
		if err == nil {
			err = errors.New("exit status 0")
		}
		c.mu.Lock()
		stopping, served := c.stopping, c.served
		c.cmd, c.exitErr = nil, err
		c.up.Store(false)
		c.out = io.Discard // build/deploy log is only for the first start
		c.mu.Unlock()
		if stopping {
			return
		}
		if !served {
			// Still in its deploy's health wait, which fails now.
			return
		}
		if c.onExit != nil {
			c.onExit()
		}
		if time.Since(started) > time.Minute {
			backoff = time.Second
		}
		c.log.Warn().Err(err).Dur("restart_in", backoff).Msg("agent exited; restarting")
		select {
		case <-c.stopc:
			return
		case <-time.After(backoff):
		}
		if backoff < 30*time.Second {
			backoff *= 2
		}
	}
}

// running reports whether the agent process is up, and how its last run
// ended when it is not.
func (c *child) running() (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cmd != nil, c.exitErr
}

// stop ends the process group with SIGTERM, then SIGKILL after grace.
func (c *child) stop(grace time.Duration) {
	c.mu.Lock()
	if !c.stopping {
		close(c.stopc)
	}
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
	req.Header.Set(runtime.AgentTokenHeader, c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// waitHealthy polls GET /ok until it answers 200; an agent that exits
// first fails it at once.
func (c *child) waitHealthy(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if c.healthy() {
			c.mu.Lock()
			c.served = true
			c.mu.Unlock()
			c.up.Store(true)
			return nil
		}
		select {
		case <-c.done:
			_, err := c.running()
			if out := c.startErr.String(); out != "" {
				return fmt.Errorf("the agent exited before it became healthy (%v):\n%s", err, out)
			}
			return fmt.Errorf("the agent exited before it became healthy (%v)", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("health check GET /ok did not pass within %v", timeout)
		}
	}
}

// probeUp marks a restarted agent up once it answers GET /ok, unless it
// exits (or is stopped) first.
func (c *child) probeUp(cmd *exec.Cmd) {
	for {
		select {
		case <-c.stopc:
			return
		case <-time.After(100 * time.Millisecond):
		}
		c.mu.Lock()
		same := c.cmd == cmd
		c.mu.Unlock()
		if !same {
			return
		}
		if c.healthy() {
			c.mu.Lock()
			if c.cmd == cmd {
				c.up.Store(true)
			}
			c.mu.Unlock()
			return
		}
	}
}
