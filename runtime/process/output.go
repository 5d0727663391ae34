package process

import (
	"io"

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
	return o, e, func() { o.Close(); e.Close() }
}
