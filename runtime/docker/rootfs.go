package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/moby/moby/client"
)

// Root filesystems built from Debian packages, for images no registry
// serves here: the agent images' bases (python.go) and the test
// harness's swarm nodes (server/servertest/swarmnode.go) share this code.

// BootstrapRootfs makes dir a Debian root filesystem of suite, with
// packages installed by debootstrap and apt by apt-get inside it, unless
// dir already holds a complete one. It returns holding dir's lock, so two
// processes do not bootstrap the same directory at once and the caller
// imports it before anyone else touches it; unlock releases it.
func BootstrapRootfs(ctx context.Context, dir, suite string, packages, apt []string, log io.Writer) (unlock func(), err error) {
	unlock, err = lockCacheDir(ctx, dir, log)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, ".slipway-complete")); err == nil {
		return unlock, nil
	}
	if err := debootstrap(ctx, dir, suite, packages, apt, log); err != nil {
		unlock()
		return nil, err
	}
	return unlock, nil
}

// ImportRootfs imports the root filesystem in dir as the image tag, with
// the Dockerfile-style changes (LABEL, ENV, CMD, ...).
func ImportRootfs(ctx context.Context, c client.ImageAPIClient, dir, tag string, changes []string) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(tarTree(dir, pw)) }()
	res, err := c.ImageImport(ctx, client.ImageImportSource{Source: pr, SourceName: "-"}, tag, client.ImageImportOptions{Changes: changes})
	if err != nil {
		pr.CloseWithError(err)
		return fmt.Errorf("import the root filesystem: %w", err)
	}
	defer res.Close()
	if err := StreamErr(res); err != nil {
		pr.CloseWithError(err)
		return fmt.Errorf("import the root filesystem: %w", err)
	}
	return nil
}

// StreamErr reads an engine's progress stream (an import, a push) to its
// end and returns the error it reports, if any.
func StreamErr(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var m struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&m); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if m.Error != "" {
			return errors.New(m.Error)
		}
	}
}
