package server

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"slipway/config"
	"slipway/runtime/docker"
)

// ImagesMain is `slipway images build [-python 3.11,3.13] [-node 18,20]`:
// it builds the docker runtime's agent images locally from Debian packages
// (debootstrap, then docker import); Python ones Slipway otherwise builds
// on first need. The root filesystems stay in SLIPWAY_IMAGE_CACHE.
func ImagesMain(ctx context.Context, cfg config.Images, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "build" {
		fmt.Fprintln(stderr, "usage: slipway images build [-python 3.11[,3.13]] [-node 18[,20]]")
		return 2
	}
	fs := flag.NewFlagSet("images build", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pythons := fs.String("python", "3.11", "comma-separated Python versions to build slipway-python images of (3.11, 3.13); empty for none")
	nodes := fs.String("node", "", "comma-separated Node.js major versions to build slipway-node images of (18, 20)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
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
	d := &docker.Driver{Client: c, Bin: bin, ImageCache: cfg.ImageCache}
	var jobs []func() (string, error)
	for _, v := range strings.Split(*pythons, ",") {
		if v = strings.TrimSpace(v); v != "" {
			jobs = append(jobs, func() (string, error) { return d.PythonImage(ctx, v, stdout) })
		}
	}
	for _, v := range strings.Split(*nodes, ",") {
		if v = strings.TrimSpace(v); v != "" {
			jobs = append(jobs, func() (string, error) { return d.NodeImage(ctx, v, stdout) })
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
