package processtest_test

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"slipway/server/servertest"
)

// runAdmin runs the binary's `slipway admin args...` against dataDir.
func runAdmin(t *testing.T, dataDir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(servertest.Binary(t), append([]string{"admin"}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "SLIPWAY_DATA_DIR=" + dataDir}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// mustAdmin runs an admin command that must succeed and returns its stdout.
func mustAdmin(t *testing.T, dataDir string, args ...string) string {
	t.Helper()
	out, errOut, code := runAdmin(t, dataDir, args...)
	if code != 0 {
		t.Fatalf("slipway admin %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// TestAdminStaleSocket: a socket left by a crashed server is replaced.
func TestAdminStaleSocket(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "admin.sock"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	_, errOut, code := runAdmin(t, dir, "org", "list")
	if code != 1 || !strings.Contains(errOut, "not running") {
		t.Fatalf("stale socket, no server: exit %d, %q", code, errOut)
	}
	s := servertest.Start(t, map[string]string{"SLIPWAY_DATA_DIR": dir})
	if out := mustAdmin(t, s.DataDir, "org", "list"); !strings.Contains(out, "Default") {
		t.Fatalf("org list: %s", out)
	}
	// A crash leaves the socket; the next start replaces it.
	s.Kill()
	s2 := servertest.Start(t, map[string]string{"SLIPWAY_DATA_DIR": dir})
	if out := mustAdmin(t, s2.DataDir, "org", "list"); !strings.Contains(out, "Default") {
		t.Fatalf("org list after a crash: %s", out)
	}
}
