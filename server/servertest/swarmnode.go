package servertest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
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
	if _, err := os.Stat(filepath.Join(dir, ".slipway-complete")); err != nil {
		RequireDebootstrap(t)
	}
	// docker.io's dependencies are installed by apt-get inside the
	// minimal system (debootstrap's own resolver does not configure them
	// reliably).
	start := time.Now()
	unlock, err := docker.BootstrapRootfs(ctx, dir, swarmNodeSuite, []string{"ca-certificates"}, swarmNodePackages, testLog{t})
	if err != nil {
		t.Fatalf("build the swarm node root filesystem: %v", err)
	}
	defer unlock()
	t.Logf("the swarm node root filesystem %s is ready after %s", dir, time.Since(start).Round(time.Second))
	if _, err := e.ImageInspect(ctx, tag); err == nil {
		return tag // another test binary imported it while this one waited
	}
	start = time.Now()
	if err := docker.ImportRootfs(ctx, e, dir, tag, []string{
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
