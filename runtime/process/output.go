package process

import (
	"io"
	"strings"
	"sync"

	"slipway/runtime"
)

// CaptureOutput sends what every agent started from now on writes, on
// every start, to out (runtime.OutputCapturer). Without it only an agent's
// first start writes to its deploy log.
func (d *Driver) CaptureOutput(out runtime.Output) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.output = out
}

func (d *Driver) capture() runtime.Output {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.output
}

// streams are where one run of the agent writes (the command graphs and
// language hosts it starts inherit its stderr), and a function to call
// once it has exited, which hands over an unterminated last line. Called
// with c.mu held.
func (c *child) streams() (stdout, stderr io.Writer, closeStreams func()) {
	if c.output == nil {
		return c.out, c.out, func() {}
	}
	o := runtime.NewLineWriter(c.output, c.spec.DeploymentID, c.spec.RevisionID, "stdout")
	e := runtime.NewLineWriter(c.output, c.spec.DeploymentID, c.spec.RevisionID, "stderr")
	var errw io.Writer = e
	if !c.served {
		// Until it is healthy, the end of its stderr says why a deploy
		// failed (a graph that cannot be imported): the deploy log gets it.
		errw = io.MultiWriter(e, &c.startErr)
	}
	return o, errw, func() { o.Close(); e.Close() }
}

// tail keeps the last 2 KiB written to it.
type tail struct {
	mu sync.Mutex
	b  []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 2048 {
		t.b = t.b[len(t.b)-2048:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}
