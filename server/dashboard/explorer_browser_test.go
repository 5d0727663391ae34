package dashboard_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"slipway/server/servertest"
)

// TestExplorerInBrowser drives the agent explorer in headless Chromium
// against real LangGraph graphs: testdata/graphs/py-agent deployed as a
// Python project on the process runtime (its requirements installed into
// the revision's virtualenv, as for any user). The steps and their checks
// are in e2e/explorer.mjs: the graphs of react, approval and parent are
// drawn (parent's subgraph with xray), a chat answer streams token by
// token, an interrupt is resumed from its form, a fork from an earlier
// checkpoint with edited state shows as a new branch, and axe finds no
// serious or critical violation.
func TestExplorerInBrowser(t *testing.T) {
	chromium, node, dir := browserTools(t)
	servertest.RequirePython311(t)
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "process"})

	const password = "explorer-password-1234"
	addOrgAdmin(t, s, "explorer@example.com", password)
	files := servertest.ProjectFiles(t, filepath.Join(servertest.RepoRoot(), "testdata", "graphs", "py-agent"))
	dep := deployArchive(t, s, "py-agent", tarball(t, files), 20*time.Minute)

	shots := os.Getenv("SLIPWAY_SCREENSHOTS")
	if shots == "" {
		shots = filepath.Join(t.TempDir(), "screenshots")
	}
	cmd := exec.Command(node, "explorer.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "BASE="+s.URL, "CHROMIUM="+chromium, "SHOTS="+shots, "DEPLOYMENT="+dep,
		"EMAIL=explorer@example.com", "PASSWORD="+password)
	out, err := cmd.CombinedOutput()
	t.Logf("browser run:\n%s", out)
	if err != nil {
		t.Fatalf("the explorer's browser steps failed: %v\nthe end of the server's log:\n%s", err, tail(s.Logs(), 200))
	}
	t.Logf("screenshots in %s", shots)
}

// tarball is a project's files as a gzipped tar.
func tarball(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), ModTime: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
