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

	roles := map[string]string{}
	for _, r := range s.Do("GET", "/api/v1/orgs/current/roles", nil).JSON().([]any) {
		roles[r.(map[string]any)["display_name"].(string)] = r.(map[string]any)["id"].(string)
	}
	const password = "explorer-password-1234"
	if r := s.Do("POST", "/api/v1/orgs/current/members/basic/batch", []any{
		map[string]any{"email": "explorer@example.com", "password": password, "role_id": roles["Organization Admin"]},
	}); r.Status != 200 {
		t.Fatalf("add the user: %d %s", r.Status, r.Body)
	}

	d := s.Do("POST", "/v2/deployments", map[string]any{"name": "py-agent", "source": "internal_source", "source_config": map[string]any{},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}, "secrets": []any{}})
	if d.Status != 201 {
		t.Fatalf("create: %d %s", d.Status, d.Body)
	}
	dep := d.Map()["id"].(string)
	up := s.Do("POST", "/v2/deployments/"+dep+"/upload-url", nil)
	if up.Status != 200 {
		t.Fatalf("upload-url: %d %s", up.Status, up.Body)
	}
	files := servertest.ProjectFiles(t, filepath.Join(servertest.RepoRoot(), "testdata", "graphs", "py-agent"))
	if r := servertest.Do(t, "PUT", up.Map()["upload_url"].(string), tarball(t, files)); r.Status != 200 {
		t.Fatalf("upload: %d %s", r.Status, r.Body)
	}
	p := s.Do("PATCH", "/v2/deployments/"+dep, map[string]any{"source_revision_config": map[string]any{
		"source_tarball_path": up.Map()["object_path"], "graph_config_path": "langgraph.json"}})
	if p.Status != 200 {
		t.Fatalf("patch: %d %s", p.Status, p.Body)
	}
	rev := p.Map()["latest_revision_id"].(string)
	start := time.Now()
	for st := ""; st != "DEPLOYED"; time.Sleep(200 * time.Millisecond) {
		st, _ = s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev, nil).Map()["status"].(string)
		switch {
		case st == "BUILD_FAILED" || st == "DEPLOY_FAILED" || st == "CREATE_FAILED" || st == "SKIPPED":
			t.Fatalf("the py-agent project ended %s:\n%s", st, tail(s.Logs(), 100))
		case time.Since(start) > 20*time.Minute:
			t.Fatalf("the py-agent project is still %s after 20 minutes", st)
		}
	}
	t.Logf("py-agent deployed in %s", time.Since(start).Round(time.Second))

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
