package docker

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"slipway/runtime"
)

// started is when this Slipway started: output an adopted container wrote
// before is not read again (it was stored by the Slipway that started it).
var started = time.Now()

// outputs follows the log streams of serving agents, one per deployment.
type outputs struct {
	mu   sync.Mutex
	out  runtime.Output
	deps map[string]*follower // deployment → the follower of its serving container
}

type follower struct {
	container string
	cancel    context.CancelFunc
}

// CaptureOutput sends what every serving agent writes to out
// (runtime.OutputCapturer): the driver follows the container's log stream
// while the container serves, across restarts by its restart policy, and
// moves to the new container when another revision (or a recreated
// container) takes over.
func (d *Driver) CaptureOutput(out runtime.Output) {
	d.outputs.mu.Lock()
	defer d.outputs.mu.Unlock()
	d.outputs.out = out
}

// follow makes sure the deployment's serving container's output is being
// followed; it is called whenever the driver records what serves. A
// scaled revision's members are followed each, their lines prefixed with
// the replica's name ("[api-1] ..."), as on the process runtime.
func (d *Driver) follow(dep string, s serving) {
	o := &d.outputs
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.out == nil {
		return
	}
	if s.members == nil {
		d.followOne(dep, dep, s.rev, s.container, "")
		return
	}
	for _, m := range s.members {
		d.followOne(dep+"/"+m.name, dep, s.rev, m.container, "["+m.name+"] ")
	}
}

// followOne follows container id under key (the deployment, or the
// deployment and replica). Under outputs.mu.
func (d *Driver) followOne(key, dep, rev, id, prefix string) {
	o := &d.outputs
	if f := o.deps[key]; f != nil {
		if f.container == id {
			return
		}
		f.cancel()
	}
	if o.deps == nil {
		o.deps = map[string]*follower{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{container: id, cancel: cancel}
	o.deps[key] = f
	go d.followContainer(ctx, dep, rev, id, prefix, o.out, func() {
		o.mu.Lock()
		if o.deps[key] == f {
			delete(o.deps, key)
		}
		o.mu.Unlock()
	})
}

// followContainer reads the container's log stream until the container no
// longer serves the deployment. The engine ends a stream when its
// container stops; it is attached again, from just after the last line
// read, until the container is gone or another one serves.
func (d *Driver) followContainer(ctx context.Context, dep, rev, id, prefix string, out runtime.Output, done func()) {
	defer done()
	var since time.Time
	first := true
	for ctx.Err() == nil {
		insp, err := d.Client.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if cerrdefs.IsNotFound(err) {
			return
		}
		if err == nil && first && insp.Container.State != nil {
			// An adopted container: what it wrote before this Slipway
			// started was stored by the one that started it.
			if t, perr := time.Parse(time.RFC3339Nano, insp.Container.State.StartedAt); perr == nil && t.Before(started) {
				since = started
			}
		}
		first = false
		if err == nil && insp.Container.State != nil && insp.Container.State.Running {
			last, rerr := d.readLogs(ctx, dep, rev, id, prefix, since, out)
			if !last.IsZero() {
				since = last
			}
			if rerr != nil && ctx.Err() == nil && !cerrdefs.IsNotFound(rerr) {
				d.Log.Debug().Err(rerr).Str("deployment_id", dep).Msg("agent log stream ended")
			}
		}
		if !d.serves(dep, id) {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// serves says whether id is the deployment's serving container (or one
// of its serving group's).
func (d *Driver) serves(dep, id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.deps[dep]
	return ok && (s.container == id || s.memberOf(id) != nil)
}

// readLogs follows one log stream from since (all when zero), handing each
// line to out with the engine's timestamp; it returns the last timestamp.
func (d *Driver) readLogs(ctx context.Context, dep, rev, id, prefix string, since time.Time, out runtime.Output) (time.Time, error) {
	opts := client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Follow: true, Timestamps: true}
	if !since.IsZero() {
		// Since is inclusive: one nanosecond on, the last line read is
		// not read again.
		t := since.Add(time.Nanosecond)
		opts.Since = fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond())
	}
	rc, err := d.Client.ContainerLogs(ctx, id, opts)
	if err != nil {
		return time.Time{}, err
	}
	defer rc.Close()
	var mu sync.Mutex
	var last time.Time
	stdout, stderr := &stampedLines{out: out, dep: dep, rev: rev, prefix: prefix, stream: "stdout", last: &last, mu: &mu},
		&stampedLines{out: out, dep: dep, rev: rev, prefix: prefix, stream: "stderr", last: &last, mu: &mu}
	// Without a TTY the stream is multiplexed; stdcopy splits it.
	_, err = stdcopy.StdCopy(stdout, stderr, rc)
	stdout.Close()
	stderr.Close()
	mu.Lock()
	defer mu.Unlock()
	return last, err
}

// stampedLines splits one demultiplexed stream into lines of the form
// "<RFC 3339 time> <text>" (the engine's Timestamps option).
type stampedLines struct {
	out              runtime.Output
	dep, rev, stream string
	prefix           string // the replica's name on each line, for a scaled revision
	mu               *sync.Mutex
	last             *time.Time
	partial          []byte
}

func (s *stampedLines) Write(p []byte) (int, error) {
	s.partial = append(s.partial, p...)
	for {
		i := strings.IndexByte(string(s.partial), '\n')
		if i < 0 {
			if len(s.partial) > runtime.MaxOutputLine+64 {
				s.emit(string(s.partial))
				s.partial = s.partial[:0]
			}
			return len(p), nil
		}
		s.emit(string(s.partial[:i]))
		s.partial = s.partial[i+1:]
	}
}

func (s *stampedLines) Close() {
	if len(s.partial) > 0 {
		s.emit(string(s.partial))
		s.partial = nil
	}
}

func (s *stampedLines) emit(line string) {
	at := time.Now().UTC()
	if ts, text, ok := strings.Cut(line, " "); ok {
		if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			at, line = t.UTC(), text
		}
	}
	s.mu.Lock()
	if at.After(*s.last) {
		*s.last = at
	}
	s.mu.Unlock()
	line = strings.TrimSuffix(line, "\r")
	for {
		piece := line
		if len(piece) > runtime.MaxOutputLine {
			piece = line[:runtime.MaxOutputLine]
		}
		s.out.Line(runtime.OutputLine{DeploymentID: s.dep, RevisionID: s.rev, Stream: s.stream, Time: at, Text: s.prefix + piece})
		line = line[len(piece):]
		if line == "" {
			return
		}
	}
}

var _ io.Writer = (*stampedLines)(nil)
