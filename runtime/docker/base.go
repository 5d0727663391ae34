package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// The official base images: an agent image of a language version is built
// on the official image of that version when the engine has it or can pull
// it (a pull takes seconds where debootstrap takes minutes), and from
// Debian packages with debootstrap only when it cannot.

// DefaultPythonBaseImage and DefaultNodeBaseImage are the official images
// (Docker Hub's python and node, Debian bookworm, slim) that
// SLIPWAY_PYTHON_BASE_IMAGE and SLIPWAY_NODE_BASE_IMAGE default to.
const (
	DefaultPythonBaseImage = "python:{version}-slim-bookworm"
	DefaultNodeBaseImage   = "node:{version}-bookworm-slim"
)

// LabelPulled is on an agent image built on an official image that Slipway
// pulled for it (absent before): pruning the last such image removes that
// base too. A base that was already in the engine (the operator's) is
// never removed.
const LabelPulled = "dev.slipway.pulled"

// LabelRootfs is on an imported Debian root filesystem: the directory of
// the image cache it was imported from (pruning its last image removes it).
const LabelRootfs = "dev.slipway.rootfs"

// pullRetry is how long a pull that timed out is not tried again: without
// a registry that answers, each build would otherwise wait the whole
// timeout before falling back.
const pullRetry = 10 * time.Minute

type pullFailure struct {
	until time.Time
	err   error
}

// baseRef is the official image of l's version, and the setting that
// names it.
func (d *Driver) baseRef(l language, version string) (ref, setting string) {
	tmpl, setting := d.PythonBaseImage, "SLIPWAY_PYTHON_BASE_IMAGE"
	def := DefaultPythonBaseImage
	if l.role == nodeLanguage.role {
		tmpl, setting, def = d.NodeBaseImage, "SLIPWAY_NODE_BASE_IMAGE", DefaultNodeBaseImage
	}
	if tmpl == "" {
		tmpl = def
	}
	return strings.ReplaceAll(tmpl, "{version}", version), setting
}

// officialBase makes ref available in the engine: its image id, and
// whether it was pulled now (false: it was there already). A pull is
// bounded by BasePullTimeout; its error says why it failed.
func (d *Driver) officialBase(ctx context.Context, ref string, log io.Writer) (id string, pulled bool, err error) {
	if res, err := d.Client.ImageInspect(ctx, ref); err == nil {
		return res.ID, false, nil
	} else if !cerrdefs.IsNotFound(err) {
		return "", false, fmt.Errorf("inspect: %w", err)
	}
	if d.BasePullTimeout <= 0 {
		return "", false, errors.New("it is not in the engine and SLIPWAY_BASE_PULL_TIMEOUT=0 turns pulls off")
	}
	d.pullMu.Lock()
	f, ok := d.pullFailed[ref]
	d.pullMu.Unlock()
	if ok && time.Now().Before(f.until) {
		return "", false, fmt.Errorf("%w (not tried again before %s)", f.err, f.until.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(log, "pulling %s (at most %s)\n", ref, d.BasePullTimeout)
	pctx, cancel := context.WithTimeout(ctx, d.BasePullTimeout)
	defer cancel()
	err = pull(pctx, d.Client, ref)
	if err != nil && ctx.Err() == nil && errors.Is(pctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("no image within %s (SLIPWAY_BASE_PULL_TIMEOUT)", d.BasePullTimeout)
		d.pullMu.Lock()
		if d.pullFailed == nil {
			d.pullFailed = map[string]pullFailure{}
		}
		d.pullFailed[ref] = pullFailure{until: time.Now().Add(pullRetry), err: err}
		d.pullMu.Unlock()
	}
	if err != nil {
		return "", false, err
	}
	d.pullMu.Lock()
	delete(d.pullFailed, ref)
	d.pullMu.Unlock()
	res, err := d.Client.ImageInspect(ctx, ref)
	if err != nil {
		return "", false, fmt.Errorf("inspect after the pull: %w", err)
	}
	return res.ID, true, nil
}

// pull pulls ref and reads the engine's progress to its end, where a
// failed pull reports its error.
func pull(ctx context.Context, c Engine, ref string) error {
	resp, err := c.ImagePull(ctx, ref, client.ImagePullOptions{})
	if err != nil {
		return err
	}
	defer resp.Close()
	return resp.Wait(ctx)
}
