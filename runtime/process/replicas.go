package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"slipway/runtime"
)

// A revision runs as a group of supervised agent processes: one for an
// unscaled deployment, else its API replicas and queue workers
// (runtime.Scale), each on a port, token and worker id of its own, each
// restarted by its supervisor when it exits. The group is what a deploy
// starts, health-checks and replaces as a whole; the proxy spreads
// requests over the API replicas that answer GET /ok now (Endpoints).

// group is the running revision of a deployment.
type group struct {
	rev, app string
	spec     runtime.Spec
	members  []*child // API replicas first (runtime.Scale.Replicas)
}

func (g *group) scaled() bool { return len(g.members) > 1 }

// stop stops every member at once.
func (g *group) stop(grace time.Duration) {
	var wg sync.WaitGroup
	for _, c := range g.members {
		wg.Add(1)
		go func() { defer wg.Done(); c.stop(grace) }()
	}
	wg.Wait()
}

// healthy says whether every member answers GET /ok.
func (g *group) healthy() bool {
	for _, c := range g.members {
		if !c.healthy() {
			return false
		}
	}
	return true
}

// waitHealthy waits for every member's first GET /ok (see child.waitHealthy);
// the first failure names its replica.
func (g *group) waitHealthy(ctx context.Context, timeout time.Duration) error {
	errs := make([]error, len(g.members))
	var wg sync.WaitGroup
	for i, c := range g.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.waitHealthy(ctx, timeout); err != nil && c.replica.Name != "" {
				errs[i] = fmt.Errorf("replica %s: %w", c.replica.Name, err)
			} else {
				errs[i] = err
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// endpoint is the base URL Deploy reports: the first API replica's.
func (g *group) endpoint() string { return g.members[0].endpoint }

// url is c's base URL with its token as the password (runtime.Driver.Endpoint).
func (c *child) url() (string, bool) {
	u, err := url.Parse(c.endpoint)
	if err != nil {
		return "", false
	}
	u.User = url.UserPassword("agent", c.token)
	return u.String(), true
}

// freePorts picks n distinct free loopback ports. The listeners stay open
// until all are picked: closed one by one, the kernel could hand the same
// port out twice, and two replicas would race to bind it.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// startGroup starts every replica of the revision; on a failure it stops
// those already started.
func (d *Driver) startGroup(s runtime.Spec, app string, log io.Writer) (*group, error) {
	g := &group{rev: s.RevisionID, app: app, spec: s}
	replicas := s.Scale.Replicas()
	if len(replicas) > 1 {
		log = &lockedWriter{w: log}
		fmt.Fprintf(log, "starting %d agent processes: %s\n", len(replicas), replicaNames(replicas))
	}
	ports, err := freePorts(len(replicas))
	if err != nil {
		return nil, fmt.Errorf("pick ports: %w", err)
	}
	for i, r := range replicas {
		c, err := d.start(s, app, r, ports[i], log)
		if err != nil {
			g.stop(d.grace())
			if r.Name != "" {
				err = fmt.Errorf("replica %s: %w", r.Name, err)
			}
			return nil, err
		}
		g.members = append(g.members, c)
	}
	return g, nil
}

func replicaNames(rs []runtime.Replica) string {
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = r.Name + " (" + r.Role + ")"
	}
	return strings.Join(names, ", ")
}

// replicaDataDir is the agent's data directory: agent-data for an
// unscaled deployment (its bbolt file), else a directory of the replica's
// own in it (its language hosts' files; the state is in PostgreSQL). It
// is created through an os.Root on agent-data, which the deployment's uid
// owns: nothing the deployment planted there (a symlink) leads the
// creation or the change of owner outside it.
func (d *Driver) replicaDataDir(dep string, r runtime.Replica, uid int) (string, error) {
	data := filepath.Join(d.depDir(dep), "agent-data")
	if r.Name == "" {
		return data, nil
	}
	name := "replica-" + r.Name
	root, err := os.OpenRoot(data)
	if err != nil {
		return "", fmt.Errorf("open the agent data directory: %w", err)
	}
	defer root.Close()
	if err := root.Mkdir(name, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("create the data directory of replica %s: %w", r.Name, err)
	}
	st, err := root.Lstat(name)
	if err != nil || !st.IsDir() {
		return "", fmt.Errorf("the data directory of replica %s is not a directory", r.Name)
	}
	if uid >= 0 {
		if err := root.Lchown(name, uid, uid); err != nil {
			return "", fmt.Errorf("hand the data directory of replica %s over: %w", r.Name, err)
		}
	}
	return filepath.Join(data, name), nil
}

// Scales: the process runtime runs scaled revisions (runtime.Scaler).
func (d *Driver) Scales() bool { return true }

// Endpoints lists the API replicas of dep that answered their last health
// check (runtime.Balancer), with their tokens; the proxy spreads requests
// over them. A replica leaves the list when its process exits or a check
// fails, and comes back once it answers GET /ok again.
func (d *Driver) Endpoints(dep string) []string {
	d.mu.Lock()
	g := d.deps[dep]
	d.mu.Unlock()
	if g == nil {
		return nil
	}
	var out []string
	for _, c := range g.members {
		if c.replica.API() && c.up.Load() {
			if u, ok := c.url(); ok {
				out = append(out, u)
			}
		}
	}
	return out
}

// checkGroup is CheckHealth of a scaled revision: every member is checked
// (and marked up or down for Endpoints); the revision serves while at
// least one API replica answers. A replica that is down is its
// supervisor's to restart: the watcher recreates the whole revision only
// when no API replica is left.
func (g *group) checkGroup() error {
	serving := 0
	var down []string
	for _, c := range g.members {
		up, _ := c.running()
		ok := up && c.healthy()
		c.up.Store(ok)
		switch {
		case !ok:
			down = append(down, c.replica.Name)
		case c.replica.API():
			serving++
		}
	}
	if serving == 0 {
		return fmt.Errorf("no API replica answers GET /ok (down: %s)", strings.Join(down, ", "))
	}
	return nil
}

// lockedWriter serializes the replicas' first-start output into one
// deploy log.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// prefixOutput names the replica at the start of each of its output
// lines ("[api-1] ..."), in the deployment's agent log.
type prefixOutput struct {
	out    runtime.Output
	prefix string
}

func (p prefixOutput) Line(l runtime.OutputLine) {
	l.Text = p.prefix + l.Text
	p.out.Line(l)
}

// replicaOutput is where a replica's output goes: out, prefixed by the
// replica's name when the revision is scaled.
func replicaOutput(out runtime.Output, r runtime.Replica) runtime.Output {
	if out == nil || r.Name == "" {
		return out
	}
	return prefixOutput{out: out, prefix: "[" + r.Name + "] "}
}

// ReplicaEndpoints lists every agent of a scaled revision, up or not
// (runtime.ReplicaLister); nil for an unscaled one.
func (d *Driver) ReplicaEndpoints(dep string) []runtime.ReplicaEndpoint {
	d.mu.Lock()
	g := d.deps[dep]
	d.mu.Unlock()
	if g == nil || !g.scaled() {
		return nil
	}
	out := make([]runtime.ReplicaEndpoint, 0, len(g.members))
	for _, c := range g.members {
		if u, ok := c.url(); ok {
			out = append(out, runtime.ReplicaEndpoint{Name: c.replica.Name, URL: u})
		}
	}
	return out
}
