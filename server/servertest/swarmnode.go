package servertest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"slipway/runtime/docker"
)

// The image of a multi-node Swarm test cluster's nodes (swarmcluster.go):
// Debian with its own dockerd, built from Debian packages because no
// outside registry is reachable here. The same image runs the cluster's
// registry (Debian's docker-registry, the open-source distribution
// registry).

// swarmNodeSuite and swarmNodePackages are the node image's recipe; its
// hash names the cached root filesystem and the image, so a change of
// recipe builds a new one and an unchanged recipe reuses the old.
const swarmNodeSuite = "bookworm"

var swarmNodePackages = []string{"docker.io", "iptables", "ca-certificates", "docker-registry"}

// swarmNodeRecipe is what the hash covers: the suite, the packages, and
// the steps below (bump v when they change).
func swarmNodeRecipe() string {
	return "v1 " + swarmNodeSuite + " minbase+ca-certificates apt " + strings.Join(swarmNodePackages, ",")
}

// swarmNodeID is the recipe's content hash.
func swarmNodeID() string {
	h := sha256.Sum256([]byte(swarmNodeRecipe()))
	return swarmNodeSuite + "-" + hex.EncodeToString(h[:6])
}

// swarmNodeImageRepo is the node image's repository; its tag is swarmNodeID.
const swarmNodeImageRepo = "slipway-swarm-node"

// labelSwarmTest is on every object a swarm cluster test creates, with the
// object's role as value; labelSwarmCluster carries the cluster's id.
const (
	labelSwarmTest    = "dev.slipway.test.swarm"
	labelSwarmCluster = "dev.slipway.test.swarm.cluster"
)

// SwarmNodeImage is the node image's reference in the engine e, built
// when the engine does not have it: from the image cache's root
// filesystem (SLIPWAY_IMAGE_CACHE, default /var/cache/slipway), which
// debootstrap and apt-get build first when the cache has none (a few
// minutes; an import takes seconds). The image stays after the test, as
// the docker runtime's root filesystems do: the next run reuses it.
func SwarmNodeImage(t testing.TB, ctx context.Context, e *client.Client) string {
	t.Helper()
	tag := swarmNodeImageRepo + ":" + swarmNodeID()
	if _, err := e.ImageInspect(ctx, tag); err == nil {
		return tag
	} else if !cerrdefs.IsNotFound(err) {
		t.Fatalf("inspect %s: %v", tag, err)
	}
	cache := os.Getenv("SLIPWAY_IMAGE_CACHE")
	if cache == "" {
		cache = docker.DefaultImageCache
	}
	dir := filepath.Join(cache, "swarmnode-"+swarmNodeID())
	unlock, err := lockDir(ctx, dir)
	if err != nil {
		t.Fatalf("lock the node image's cache: %v", err)
	}
	defer unlock()
	if _, err := e.ImageInspect(ctx, tag); err == nil {
		return tag // another test binary built it while this one waited
	}
	if _, err := os.Stat(filepath.Join(dir, ".slipway-complete")); err != nil {
		RequireDebootstrap(t)
		start := time.Now()
		if err := bootstrapSwarmNode(ctx, dir, testLog{t}); err != nil {
			t.Fatalf("build the swarm node root filesystem: %v", err)
		}
		t.Logf("built the swarm node root filesystem %s in %s", dir, time.Since(start).Round(time.Second))
	}
	start := time.Now()
	if err := importTree(ctx, e, dir, tag, []string{
		"LABEL " + labelSwarmTest + "=node-image",
		"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	}); err != nil {
		t.Fatalf("import the swarm node image: %v", err)
	}
	t.Logf("imported %s in %s", tag, time.Since(start).Round(time.Millisecond))
	return tag
}

type testLog struct{ t testing.TB }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// bootstrapSwarmNode builds the node's root filesystem in dir: a minimal
// Debian, then the packages with apt-get inside it (debootstrap's own
// resolver does not configure docker.io's dependencies reliably), then
// without apt's caches. A partial tree is built aside and renamed at the
// end, so an interrupted build leaves nothing that looks complete.
func bootstrapSwarmNode(ctx context.Context, dir string, log io.Writer) error {
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	cmd := osexec.CommandContext(ctx, "debootstrap", "--variant=minbase", "--include=ca-certificates", swarmNodeSuite, tmp, "http://deb.debian.org/debian")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("debootstrap %s: %w\n%s", swarmNodeSuite, err, tail(out.String(), 2000))
	}
	out.Reset()
	cmd = osexec.CommandContext(ctx, "chroot", append([]string{tmp, "apt-get", "install", "-y", "-q", "--no-install-recommends"}, swarmNodePackages...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND=noninteractive", "LANG=C.UTF-8"}
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("apt-get install %s: %w\n%s", strings.Join(swarmNodePackages, " "), err, tail(out.String(), 2000))
	}
	for _, p := range []string{"var/cache/apt/archives", "var/lib/apt/lists"} {
		entries, _ := os.ReadDir(filepath.Join(tmp, p))
		for _, e := range entries {
			if e.Name() != "partial" && e.Name() != "lock" {
				os.RemoveAll(filepath.Join(tmp, p, e.Name()))
			}
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, ".slipway-complete"), nil, 0o644); err != nil {
		return err
	}
	os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	fmt.Fprintf(log, "swarm node root filesystem: %s\n", dir)
	return nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// importTree imports dir as image tag, with owners, modes and devices as
// they are (tar --numeric-owner); the engine provides /proc, /sys and
// /dev, so their contents stay out.
func importTree(ctx context.Context, e *client.Client, dir, tag string, changes []string) error {
	cmd := osexec.CommandContext(ctx, "tar", "-C", dir, "--numeric-owner", "--exclude=./proc/*", "--exclude=./sys/*", "--exclude=./dev/*", "--exclude=./.slipway-complete", "-cf", "-", ".")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	pr, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("tar: %w", err)
	}
	res, err := e.ImageImport(ctx, client.ImageImportSource{Source: pr, SourceName: "-"}, tag, client.ImageImportOptions{Changes: changes})
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("import: %w", err)
	}
	defer res.Close()
	if err := EngineStreamErr(res); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("import: %w", err)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("tar: %w: %s", err, tail(stderr.String(), 500))
	}
	return nil
}

// EngineStreamErr reads an engine's progress stream to its end and returns
// the error it reports, if any.
func EngineStreamErr(r io.Reader) error {
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

// lockDir takes an exclusive flock on dir+".lock", so that two test
// binaries do not bootstrap the same directory at once.
func lockDir(ctx context.Context, dir string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, err
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
