package servertest

import (
	"context"
	"io/fs"
	"os"
	osexec "os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"slipway/runtime/docker"
)

// What the end-to-end suites (processtest and its corpus) need from the
// machine. Each skips with a message, or fails under CI=true, where CI
// installs what is missing.

func missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg + "; under CI=true this fails instead")
}

// RequirePython311 needs python3.11 with venv, which Python projects build with.
func RequirePython311(t testing.TB) {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3.11", "/usr/local/bin/python3.11"} {
		if osexec.Command(p, "-c", "import venv, ensurepip").Run() == nil {
			return
		}
	}
	missing(t, "the Python project tests need python3.11 with venv (apt-get install python3-venv)")
}

// JSSuite is the JS SDK's end-to-end suite.
func JSSuite() string {
	return filepath.Join(RepoRoot(), "runtime", "agent", "hosts", "js", "e2e")
}

// RequireJSSDK needs node, npm and the JS SDK that drives a deployed
// JavaScript project.
func RequireJSSDK(t testing.TB) {
	t.Helper()
	_, nodeErr := osexec.LookPath("node")
	_, npmErr := osexec.LookPath("npm")
	_, sdkErr := os.Stat(filepath.Join(JSSuite(), "node_modules", "@langchain", "langgraph-sdk"))
	if nodeErr != nil || npmErr != nil || sdkErr != nil {
		missing(t, "node, npm, and `npm ci` in runtime/agent/hosts/js/e2e, are needed to deploy a JavaScript project")
	}
}

// RequireDebootstrap needs debootstrap, which builds the docker runtime's
// base images when no registry has them.
func RequireDebootstrap(t testing.TB) {
	t.Helper()
	if _, err := osexec.LookPath("debootstrap"); err != nil {
		missing(t, "the docker project tests need debootstrap (apt-get install debootstrap)")
	}
}

var (
	engineOnce sync.Once
	engineCli  *client.Client
	engineErr  error
)

// DockerEngine is a client of the local Docker engine, for inspecting what
// the docker runtime created.
func DockerEngine(t testing.TB) *client.Client {
	t.Helper()
	engineOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		engineCli, _, engineErr = docker.Connect(ctx)
	})
	if engineErr != nil {
		missing(t, "the docker runtime tests need a Docker engine (on Debian: apt-get install docker.io, then start dockerd as root): "+engineErr.Error())
	}
	return engineCli
}

// RequireRuntime needs what driver needs (a Docker engine for docker; the
// process runtime needs nothing) and, for docker, removes at the test's
// end whatever the installs it started left behind.
func RequireRuntime(t testing.TB, driver string) {
	t.Helper()
	if driver != "docker" {
		return
	}
	e := DockerEngine(t)
	// Containers outlive the server: whatever the installs this test
	// started leave behind (it failed half-way) goes, as if no deployment
	// were on record. Objects of any other install on the engine (a
	// developer's own serve, another test binary) carry another instance
	// id and stay.
	t.Cleanup(func() { CleanupInstalls(t, e) })
}

// CleanupInstalls removes every docker object of the installs t started,
// and only those: each carries its install's instance id.
func CleanupInstalls(t testing.TB, e *client.Client) {
	t.Helper()
	for _, s := range Started(t) {
		if s.InstanceID == "" {
			continue
		}
		d := &docker.Driver{Client: e, Root: t.TempDir(), Instance: s.InstanceID}
		if err := d.Reconcile(context.Background(), map[string]string{}); err != nil {
			t.Logf("clean up docker objects of install %s: %v", s.InstanceID, err)
		}
		// Its agent images too; the shared cache of root filesystems
		// stays (the prune's cache is elsewhere).
		d.ImageCache = t.TempDir()
		if _, err := d.PruneImages(context.Background()); err != nil {
			t.Logf("prune the images of install %s: %v", s.InstanceID, err)
		}
	}
}

// ProjectFiles reads a project directory into path → contents (without
// node_modules and __pycache__).
func ProjectFiles(t testing.TB, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "__pycache__") {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
