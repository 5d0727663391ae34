package server

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"slipway/config"
	"slipway/runtime/docker"
	"slipway/server/admin"
	"slipway/storage"
)

const imagesUsage = `usage: slipway images build [-python 3.11[,3.13]] [-node 18[,20]]
       slipway images prune`

// ImagesMain is `slipway images build|prune`. build makes the docker
// runtime's Python and Node.js agent images of the install at
// SLIPWAY_DATA_DIR ahead of the first deploy that needs them: on the
// official images when the engine has or can pull them, else from Debian
// packages (debootstrap, root filesystems kept in SLIPWAY_IMAGE_CACHE).
// prune has the running server remove the images and cached root
// filesystems no deployment of the install uses any more.
func ImagesMain(ctx context.Context, cfg config.ImagesCommand, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "build" && args[0] != "prune") {
		fmt.Fprintln(stderr, imagesUsage)
		return 2
	}
	if args[0] == "prune" {
		return imagesPrune(cfg, args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("images build", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pythons := fs.String("python", "3.11", "comma-separated Python versions to build slipway-python images of; empty for none")
	nodes := fs.String("node", "", "comma-separated Node.js major versions to build slipway-node images of")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	instance, err := installID(cfg.DataDir)
	if err != nil {
		fmt.Fprintf(stderr, "slipway images: %v\n", err)
		return 1
	}
	bin, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "slipway images: %v\n", err)
		return 1
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	c, _, err := docker.Connect(cctx)
	cancel()
	if err != nil {
		fmt.Fprintf(stderr, "slipway images: %v\n", err)
		return 1
	}
	d := &docker.Driver{Client: c, Bin: bin, ImageCache: cfg.ImageCache, Instance: instance,
		PythonBaseImage: cfg.PythonBaseImage, NodeBaseImage: cfg.NodeBaseImage, BasePullTimeout: cfg.BasePullTimeout}
	var jobs []func() (string, error)
	for _, v := range strings.Split(*pythons, ",") {
		if v = strings.TrimSpace(v); v != "" {
			jobs = append(jobs, func() (string, error) { return d.PythonImage(docker.WithBuilder(ctx, "slipway images"), v, stdout) })
		}
	}
	for _, v := range strings.Split(*nodes, ",") {
		if v = strings.TrimSpace(v); v != "" {
			jobs = append(jobs, func() (string, error) { return d.NodeImage(docker.WithBuilder(ctx, "slipway images"), v, stdout) })
		}
	}
	for _, job := range jobs {
		start := time.Now()
		tag, err := job()
		if err != nil {
			fmt.Fprintf(stderr, "slipway images: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "%s (%s)\n", tag, time.Since(start).Round(time.Millisecond))
	}
	return 0
}

// imagesPrune is `slipway images prune`, done by the running server: it
// knows which images its deployments use, and waits for its builds.
func imagesPrune(cfg config.ImagesCommand, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintln(stderr, imagesUsage)
		return 2
	}
	var out admin.PruneImagesResponse
	if err := admin.NewClient(cfg.DataDir).Do("POST", "/v1/images/prune", nil, &out); err != nil {
		fmt.Fprintf(stderr, "slipway images prune: %v\n", err)
		return 1
	}
	for _, r := range out.Removed {
		fmt.Fprintf(stdout, "removed %s\n", r)
	}
	fmt.Fprintf(stdout, "%d removed\n", len(out.Removed))
	return 0
}

// installID is the id of the install at dataDir: the running server's,
// else read from its database.
func installID(dataDir string) (string, error) {
	var res admin.InstanceResponse
	err := admin.NewClient(dataDir).Do("GET", "/v1/instance", nil, &res)
	if err == nil {
		return res.InstanceID, nil
	}
	if !errors.Is(err, admin.ErrNotRunning) {
		return "", err
	}
	path := filepath.Join(dataDir, "slipway.db")
	if _, serr := os.Stat(path); serr != nil {
		return "", fmt.Errorf("no install at SLIPWAY_DATA_DIR=%s (run slipway serve there once, or point SLIPWAY_DATA_DIR at its data directory): %w", dataDir, serr)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 3 * time.Second})
	if err != nil {
		return "", fmt.Errorf("open the database of SLIPWAY_DATA_DIR=%s: %w", dataDir, err)
	}
	defer db.Close()
	return storage.InstanceID(db)
}
