package cli_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"slipway/runtime/docker"
	"slipway/server/servertest"
)

// dockerEngine connects to the local engine: without one the docker
// variant is skipped, or fails under CI=true (CI starts dockerd).
func dockerEngine(t *testing.T) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	cli, _, err := docker.Connect(ctx)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the docker variant needs a Docker engine (CI starts dockerd): %v", err)
		}
		t.Skipf("skipping: the docker variant needs a Docker engine; under CI=true this fails instead: %v", err)
	}
	return cli
}

// shellImageFiles are what a build command of the end-to-end test needs:
// a POSIX shell and sleep, with the C library they load.
var shellImageFiles = map[string]string{
	"bin/sh":                         "/bin/dash",
	"bin/sleep":                      "/bin/sleep",
	"lib/x86_64-linux-gnu/libc.so.6": "/lib/x86_64-linux-gnu/libc.so.6",
	"lib64/ld-linux-x86-64.so.2":     "/lib64/ld-linux-x86-64.so.2",
}

// shellImage imports a minimal base image with a shell from this
// machine's own files (`docker import` of a tiny rootfs), so the docker
// runtime can run build commands without pulling from a registry.
func shellImage(t *testing.T, cli *client.Client) string {
	t.Helper()
	const ref = "slipway-e2e/shell:1"
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, dir := range []string{"bin/", "lib/", "lib/x86_64-linux-gnu/", "lib64/", "tmp/"} {
		if err := tw.WriteHeader(&tar.Header{Name: dir, Typeflag: tar.TypeDir, Mode: 0o1777}); err != nil {
			t.Fatal(err)
		}
	}
	for name, src := range shellImageFiles {
		real, err := filepath.EvalSymlinks(src)
		if err != nil {
			t.Skipf("skipping: the docker variant builds its base image from %s: %v", src, err)
		}
		raw, err := os.ReadFile(real)
		if err != nil {
			t.Fatal(err)
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(raw)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(raw); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cli.ImageImport(ctx, client.ImageImportSource{Source: &buf, SourceName: "-"}, ref, client.ImageImportOptions{})
	if err != nil {
		t.Fatalf("docker import: %v", err)
	}
	_, _ = io.Copy(io.Discard, res)
	_ = res.Close()
	return ref
}

// removeDockerObjects removes what the servers this test started left on
// the engine, and only that: each object carries its install's id.
func removeDockerObjects(t *testing.T, cli *client.Client) {
	for _, s := range servertest.Started(t) {
		if s.InstanceID == "" {
			continue
		}
		d := &docker.Driver{Client: cli, Root: t.TempDir(), Instance: s.InstanceID}
		if err := d.Reconcile(context.Background(), map[string]string{}); err != nil {
			t.Logf("clean up docker objects of install %s: %v", s.InstanceID, err)
		}
	}
}
