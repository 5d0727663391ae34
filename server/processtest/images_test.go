package processtest_test

import (
	"os"
	osexec "os/exec"
	"strings"
	"testing"

	"slipway/server/servertest"
)

// TestImagesBuild runs `slipway images build` with the official images
// out of reach: it makes the install's Python and Node.js agent images of
// this binary (from the cached root filesystems, or debootstrap), saying
// why, which then carry the binary, the host's trust store and
// a Python with venv or node with npm; a version Debian does not carry is
// refused with what to do.
func TestImagesBuild(t *testing.T) {
	longParallel(t)
	servertest.SkipShort(t, "building the language images")
	engine(t)
	if _, err := osexec.LookPath("debootstrap"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("slipway images build needs debootstrap (apt-get install debootstrap)")
		}
		t.Skip("skipping: debootstrap is not installed; under CI=true this fails instead")
	}
	bin := servertest.Binary(t)
	// The images are the install's: `images build` asks the running
	// server for its id. The official images are out of reach (nothing
	// listens there), so the images come from Debian packages.
	s := servertest.Start(t, nil)
	requireRuntime(t, "docker") // cleans up the install's images
	nowhere := servertest.FreeAddr(t)
	images := func(args ...string) *osexec.Cmd {
		cmd := osexec.Command(bin, append([]string{"images"}, args...)...)
		cmd.Env = append(os.Environ(), "SLIPWAY_DATA_DIR="+s.DataDir,
			"SLIPWAY_PYTHON_BASE_IMAGE="+nowhere+"/python:{version}", "SLIPWAY_NODE_BASE_IMAGE="+nowhere+"/node:{version}")
		return cmd
	}
	out, err := images("build", "-python", "3.11").CombinedOutput()
	if err != nil {
		t.Fatalf("images build: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	tag, _, _ := strings.Cut(lines[len(lines)-1], " ")
	if !strings.HasPrefix(tag, "slipway-python:3.11-") {
		t.Fatalf("images build printed:\n%s", out)
	}
	run, err := osexec.Command("docker", "run", "--rm", "--network", "none", "--entrypoint", "/bin/sh", tag, "-c",
		`python3 -c 'import sys, venv, ensurepip; print(sys.version_info[:2])' && test -x /slipway && id -u && echo "$PIP_CERT"`).CombinedOutput()
	if err != nil || !strings.Contains(string(run), "(3, 11)") || !strings.Contains(string(run), "65534") || !strings.Contains(string(run), "/etc/ssl/certs/ca-certificates.crt") {
		t.Fatalf("the image %s: %v\n%s", tag, err, run)
	}
	// Building again finds it.
	again, err := images("build").CombinedOutput()
	if l := strings.Split(strings.TrimSpace(string(again)), "\n"); err != nil || !strings.HasPrefix(l[len(l)-1], tag+" ") || strings.Contains(string(again), "==> build") {
		t.Fatalf("images build again: %v\n%s", err, again)
	}
	// Node.js: nodejs from debootstrap, npm with apt-get inside it.
	out, err = images("build", "-python", "", "-node", "20").CombinedOutput()
	lines = strings.Split(strings.TrimSpace(string(out)), "\n")
	node, _, _ := strings.Cut(lines[len(lines)-1], " ")
	if err != nil || !strings.HasPrefix(node, "slipway-node:20-") {
		t.Fatalf("images build -node 20: %v\n%s", err, out)
	}
	run, err = osexec.Command("docker", "run", "--rm", "--network", "none", "--entrypoint", "/bin/sh", node, "-c",
		`node --version && npm --version >/dev/null && test -x /slipway && echo "$NODE_EXTRA_CA_CERTS"`).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(run), "v20.") || !strings.Contains(string(run), "/etc/ssl/certs/ca-certificates.crt") {
		t.Fatalf("the image %s: %v\n%s", node, err, run)
	}
	out, err = images("build", "-python", "3.12").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "could not pull "+nowhere+"/python:3.12 (") ||
		!strings.Contains(string(out), "from Debian packages only for 3.11 (bookworm) and 3.13 (trixie), not 3.12: ") ||
		!strings.Contains(string(out), "set SLIPWAY_PYTHON_BASE_IMAGE to an image with Python 3.12") {
		t.Fatalf("an unbuildable version: %v\n%s", err, out)
	}
}
