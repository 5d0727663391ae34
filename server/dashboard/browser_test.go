package dashboard_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"slipway/server/servertest"
)

// browserTools is servertest.Browser for the dashboard's tests.
func browserTools(t *testing.T) (chromium, node, dir string) {
	t.Helper()
	return servertest.Browser(t, "the dashboard's browser tests")
}

// agentArchive is a source archive serving the counter command graph (it
// can stop to ask a question: an interrupt) as "agent".
func agentArchive(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "counter")
	cmd := exec.Command("go", "build", "-o", bin, "./testdata/graphs/counter")
	cmd.Dir = servertest.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the counter graph: %v\n%s", err, out)
	}
	counter, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct {
		name string
		mode int64
		body []byte
	}{
		{"langgraph.json", 0o644, []byte(`{"graphs": {"agent": {"command": ["./bin/counter"]}}}`)},
		{"bin/counter", 0o755, counter},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.body)), ModTime: time.Now()}); err != nil {
			t.Fatal(err)
		}
		tw.Write(f.body)
	}
	tw.Close()
	gz.Close()
	path := filepath.Join(t.TempDir(), "agent.tar.gz")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDashboardInBrowser drives the dashboard in headless Chromium against
// a real `slipway serve` (process runtime), as its users would: the steps
// and their checks are in e2e/dashboard.mjs. Afterwards the audit log,
// read through the API, must hold the events the browser's actions wrote.
func TestDashboardInBrowser(t *testing.T) {
	chromium, node, dir := browserTools(t)
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "process", "DEFAULT_ORG_FEATURE_CAN_USE_AUDIT_LOGS": "true"})

	roles := map[string]string{}
	for _, r := range s.Do("GET", "/api/v1/orgs/current/roles", nil).JSON().([]any) {
		roles[r.(map[string]any)["display_name"].(string)] = r.(map[string]any)["id"].(string)
	}
	const adminPW, viewerPW = "admin-password-1234", "viewer-password-1234"
	r := s.Do("POST", "/api/v1/orgs/current/members/basic/batch", []any{
		map[string]any{"email": "admin@example.com", "password": adminPW, "role_id": roles["Organization Admin"]},
		map[string]any{"email": "viewer@example.com", "password": viewerPW, "role_id": roles["Organization Viewer"]},
	})
	if r.Status != 200 {
		t.Fatalf("add users: %d %s", r.Status, r.Body)
	}
	viewer := r.JSON().([]any)[1].(map[string]any)["id"].(string)
	if r := s.Do("PATCH", "/api/v1/workspaces/current/members/"+viewer, map[string]any{"role_id": roles["Viewer"]}); r.Status != 200 {
		t.Fatalf("viewer's workspace role: %d %s", r.Status, r.Body)
	}

	if r := s.Do("POST", "/api/v1/workspaces", map[string]any{"display_name": "Second"}); r.Status != 200 {
		t.Fatalf("second workspace: %d %s", r.Status, r.Body)
	}
	vk := s.Do("POST", "/api/v1/api-key", map[string]any{"description": "viewer key", "role_id": "Viewer"})
	if vk.Status != 200 {
		t.Fatalf("viewer key: %d %s", vk.Status, vk.Body)
	}
	viewerKey := vk.Map()["key"].(string)

	// A page of another origin that posts a form to Slipway with the
	// browser's cookies: the CSRF check must refuse it.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>elsewhere</title><form id="f" method="post" action="%s/api/v1/api-key">`+
			`<input name="description" value="stolen"></form><script>document.getElementById("f").submit()</script>`, s.URL)
	}))
	defer evil.Close()

	shots := os.Getenv("SLIPWAY_SCREENSHOTS")
	if shots == "" {
		shots = filepath.Join(t.TempDir(), "screenshots")
	}
	folder := filepath.Join(t.TempDir(), "echo-agent")
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(folder, "langgraph.json"), []byte(`{"graphs": {"agent": {"builtin": "echo"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "dashboard.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "BASE="+s.URL, "CHROMIUM="+chromium, "ARCHIVE="+agentArchive(t), "SHOTS="+shots, "FOLDER="+folder,
		"EVIL="+evil.URL, "ADMIN_EMAIL=admin@example.com", "ADMIN_PASSWORD="+adminPW,
		"VIEWER_EMAIL=viewer@example.com", "VIEWER_PASSWORD="+viewerPW, "VIEWER_KEY="+viewerKey)
	// The script asks for one thing only the host can do: "kill-agent ID"
	// kills that deployment's agent processes, as a crash would, and is
	// answered on its stdin once done.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// Separate buffers: the copy into Stderr's buffer runs in its own
	// goroutine for as long as the process runs.
	var out, errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		line := lines.Text()
		out.WriteString(line + "\n")
		if dep, ok := strings.CutPrefix(line, "kill-agent "); ok {
			n := killAgent(t, filepath.Join(s.DataDir, "deployments", dep))
			fmt.Fprintf(stdin, "killed %d\n", n)
		}
	}
	err = cmd.Wait()
	t.Logf("browser run:\n%s%s", out.String(), errOut.String())
	if err != nil {
		t.Fatalf("the browser steps failed: %v\nthe end of the server's log:\n%s", err, tail(s.Logs(), 200))
	}
	t.Logf("screenshots in %s", shots)

	// What the browser did is in the audit log, as if done with the API.
	from := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	to := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	seen := map[string]bool{}
	for cursor := ""; ; {
		r = s.Do("GET", "/api/v1/audit-logs?limit=100&start_time="+from+"&end_time="+to+"&cursor="+cursor, nil)
		if r.Status != 200 {
			t.Fatalf("audit log: %d %s", r.Status, r.Body)
		}
		page := r.JSON().(map[string]any)
		for _, ev := range page["items"].([]any) {
			e := ev.(map[string]any)
			if api, ok := e["api"].(map[string]any); ok && e["status"] == "Success" {
				seen[api["operation"].(string)] = true
			}
		}
		next, _ := page["cursor"].(string)
		if next == "" {
			break
		}
		cursor = url.QueryEscape(next)
	}
	for _, op := range []string{"create_deployment", "update_deployment", "delete_deployment", "create_api_key", "delete_api_key",
		"create_personal_access_token", "delete_personal_access_token", "invite_user_to_org"} {
		if !seen[op] {
			t.Errorf("the audit log has no successful %s from the browser's actions; it has %v", op, seen)
		}
	}
}

// TestCookieChangeNeedsCSRFToken: a change sent with the dashboard's
// session cookie but without its CSRF header, or from another origin, is
// refused before any handler runs; with both it passes.
func TestCookieChangeNeedsCSRFToken(t *testing.T) {
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "fake"})
	r := s.Do("POST", "/ui/session", map[string]any{"api_key": s.Key}, "X-Api-Key", "")
	if r.Status != 200 {
		t.Fatalf("sign in: %d %s", r.Status, r.Body)
	}
	var session, csrf string
	for _, c := range r.Header.Values("Set-Cookie") {
		name, rest, _ := strings.Cut(c, "=")
		value, attrs, _ := strings.Cut(rest, ";")
		switch name {
		case "__Host-slipway_session":
			session = value
			if !strings.Contains(attrs, "HttpOnly") || !strings.Contains(attrs, "SameSite=Strict") || !strings.Contains(attrs, "Secure") {
				t.Errorf("session cookie attributes %q: want HttpOnly, Secure and SameSite=Strict", attrs)
			}
		case "__Host-slipway_csrf":
			csrf = value
		}
	}
	if session == "" || csrf == "" {
		t.Fatalf("cookies: %q", r.Header.Values("Set-Cookie"))
	}
	cookies := "__Host-slipway_session=" + session + "; __Host-slipway_csrf=" + csrf
	body := map[string]any{"description": "k", "role_id": "Viewer"}
	for _, tc := range []struct {
		name    string
		headers []string
		want    int
	}{
		{"no CSRF header", []string{"Cookie", cookies}, 403},
		{"wrong CSRF header", []string{"Cookie", cookies, "X-CSRF-Token", "x" + csrf}, 403},
		{"other origin", []string{"Cookie", cookies, "X-CSRF-Token", csrf, "Origin", "http://elsewhere.example"}, 403},
		{"cross-site fetch", []string{"Cookie", cookies, "X-CSRF-Token", csrf, "Sec-Fetch-Site", "cross-site"}, 403},
		{"the dashboard's own", []string{"Cookie", cookies, "X-CSRF-Token", csrf, "Origin", s.URL, "Sec-Fetch-Site", "same-origin"}, 200},
		// Planted under the unprefixed names (by another host, or over
		// plain http), the cookies are not read on this secure origin.
		{"unprefixed", []string{"Cookie", "slipway_session=" + session + "; slipway_csrf=" + csrf, "X-CSRF-Token", csrf}, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.Do("POST", "/api/v1/api-key", body, append([]string{"X-Api-Key", ""}, tc.headers...)...)
			if r.Status != tc.want {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.want, r.Body)
			}
		})
	}
	// Reads need no token: an EventSource cannot send one.
	if r := s.Do("GET", "/v2/deployments", nil, "X-Api-Key", "", "Cookie", cookies); r.Status != 200 {
		t.Fatalf("read with the cookie: %d %s", r.Status, r.Body)
	}
}

// TestDashboardHeaders: the page and its files are served with the strict
// policy, and nothing else of the API is shadowed by the page at /.
func TestDashboardHeaders(t *testing.T) {
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "fake"})
	for _, path := range []string{"/", "/ui/assets/app.js", "/ui/assets/app.css"} {
		r := s.Do("GET", path, nil)
		if r.Status != 200 {
			t.Fatalf("GET %s: %d", path, r.Status)
		}
		csp := r.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
		if r.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s: X-Frame-Options %q", path, r.Header.Get("X-Frame-Options"))
		}
	}
	if r := s.Do("GET", "/ok", nil); r.Status != 200 || !strings.Contains(string(r.Body), "ok") {
		t.Errorf("GET /ok: %d %s", r.Status, r.Body)
	}
}

// killAgent SIGKILLs every process whose working directory is under dir
// (a deployment's directory on the process runtime) and says how many.
func killAgent(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err == nil &&
			(cwd == dir || strings.HasPrefix(cwd, dir+string(filepath.Separator))) {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				n++
			}
		}
	}
	return n
}

// tail is the last n lines of a log.
func tail(log string, n int) string {
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
