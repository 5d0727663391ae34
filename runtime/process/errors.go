package process

import (
	"context"
	"io"
	"path/filepath"
	"strings"

	"slipway/runtime"
)

// Build's and Deploy's errors become the revision's status message and a
// line of its log, which an API client and every member of the workspace
// read. They say what went wrong in the project's own terms: the files of
// the source relative to it (build.PathError and the project readers do
// that where the error is made), and never Slipway's absolute paths. The
// scrubber below is the last line of that: whatever error text still names
// a path under the data directory (an os error from deep down, the end of
// an agent's stderr) has it rewritten before it leaves the driver.

// Build builds the revision (see buildRevision).
func (d *Driver) Build(ctx context.Context, s runtime.Spec, log io.Writer) (string, error) {
	app, err := d.buildRevision(ctx, s, log)
	return app, d.public(s, err)
}

// Deploy hands the deployment over to the revision (see deploy).
func (d *Driver) Deploy(ctx context.Context, s runtime.Spec, app string, log io.Writer) (string, error) {
	ep, err := d.deploy(ctx, s, app, log)
	return ep, d.public(s, err)
}

// scrubber rewrites Slipway's paths for revision s's messages: the
// source's files relative to it, the rest relative to the revision, the
// deployment or the data directory, in angle brackets.
func (d *Driver) scrubber(s runtime.Spec) *strings.Replacer {
	rev := d.revDir(s.DeploymentID, s.RevisionID)
	dep := d.depDir(s.DeploymentID)
	app := filepath.Join(rev, "app")
	// At one position the first pair that matches wins: longest first.
	return strings.NewReplacer(
		app+"/", "",
		app, "the source",
		rev, "<revision>",
		dep, "<deployment>",
		d.Root, "<deployments>",
		d.DataDir, "<data dir>",
	)
}

// public is err as the API and the revision's log may show it.
func (d *Driver) public(s runtime.Spec, err error) error {
	if err == nil || d.DataDir == "" {
		return err
	}
	msg := d.scrubber(s).Replace(err.Error())
	if msg == err.Error() {
		return err
	}
	return &publicError{msg: msg, err: err}
}

// publicError keeps the error it rewrites for errors.Is and errors.As
// (runtime.ErrUnsupported, context.Canceled).
type publicError struct {
	msg string
	err error
}

func (e *publicError) Error() string { return e.msg }
func (e *publicError) Unwrap() error { return e.err }
