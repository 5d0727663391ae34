package server

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"slipway/runtime/docker"
)

// ImagesMain is `slipway images build [-python 3.11,3.13]`: it builds the
// docker runtime's Python agent images locally from Debian packages
// (debootstrap, then docker import), which Slipway otherwise builds on
// first need; the root filesystems stay in SLIPWAY_IMAGE_CACHE.
func ImagesMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "build" {
		fmt.Fprintln(stderr, "usage: slipway images build [-python 3.11[,3.13]]")
		return 2
	}
	fs := flag.NewFlagSet("images build", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pythons := fs.String("python", "3.11", "comma-separated Python versions to build slipway-python images of (3.11, 3.13)")
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
	cache := os.Getenv("SLIPWAY_IMAGE_CACHE")
	d := &docker.Driver{Client: c, Bin: bin, ImageCache: cache}
	for _, py := range strings.Split(*pythons, ",") {
		start := time.Now()
		tag, err := d.PythonImage(ctx, strings.TrimSpace(py), stdout)
		if err != nil {
			fmt.Fprintf(stderr, "slipway images: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "%s (%s)\n", tag, time.Since(start).Round(time.Millisecond))
	}
	return 0
}
