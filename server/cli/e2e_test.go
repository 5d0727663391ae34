package cli_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"slipway/server/servertest"
)

// runtimes the end-to-end test runs on: the process and docker runtimes
// (docker is skipped without an engine, and required under CI=true);
// SLIPWAY_CLI_E2E_RUNTIMES=process picks some. On docker the build-command
// steps use a base image with a shell: SLIPWAY_CLI_E2E_BASE_IMAGE, or one
// the test imports from this machine's own shell (no registry needed).
func runtimes() []string {
	if v := os.Getenv("SLIPWAY_CLI_E2E_RUNTIMES"); v != "" {
		return strings.Split(v, ",")
	}
	return []string{"process", "docker"}
}

// user runs the slipway binary as a user would: from the checkout, with
// only environment variables saying where the server is.
type user struct {
	t   *testing.T
	bin string
	env []string
}

type result struct {
	stdout, stderr string
	code           int
}

func (u *user) cmd(args ...string) *exec.Cmd {
	c := exec.Command(u.bin, args...)
	c.Dir = servertest.RepoRoot()
	c.Env = u.env
	return c
}

func (u *user) run(args ...string) result {
	u.t.Helper()
	c := u.cmd(args...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		u.t.Fatalf("slipway %v: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}

// ok runs a command that must succeed.
func (u *user) ok(args ...string) result {
	u.t.Helper()
	r := u.run(args...)
	if r.code != 0 {
		u.t.Fatalf("slipway %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// copyDir copies a testdata project so that the test can change it.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, _ := d.Info()
		return os.WriteFile(target, raw, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCLIEndToEnd drives the whole client against a real server: deploy
// from testdata (create, upload, follow, URL), a second deploy after a code
// change (a new revision), rollback, logs -f seeing lines as the build
// writes them, ls --json, a broken project, bad input, rm --yes.
func TestCLIEndToEnd(t *testing.T) {
	for _, rt := range runtimes() {
		t.Run(rt, func(t *testing.T) { cliEndToEnd(t, rt) })
	}
}

func cliEndToEnd(t *testing.T, rt string) {
	baseImage := os.Getenv("SLIPWAY_CLI_E2E_BASE_IMAGE")
	if rt == "docker" {
		cli := dockerEngine(t)
		if baseImage == "" {
			baseImage = shellImage(t, cli)
		}
		// Registered before the server starts, so it runs after it stops.
		t.Cleanup(func() { removeDockerObjects(t, cli) })
	}
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": rt})
	home := t.TempDir()
	u := &user{t: t, bin: servertest.Binary(t), env: []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"SLIPWAY_URL=" + s.URL, "SLIPWAY_API_KEY=" + s.Key,
	}}
	shellBuilds := rt != "docker" || baseImage != ""
	// project copies a testdata project; on docker a build command needs a
	// base image with a shell.
	project := func(name string) string {
		dir := filepath.Join(t.TempDir(), name)
		copyDir(t, filepath.Join(servertest.RepoRoot(), "testdata", name), dir)
		if rt == "docker" && baseImage != "" {
			write(t, filepath.Join(dir, "langgraph.json"), `{"base_image": "`+baseImage+`", "graphs": {"agent": {"builtin": "echo"}}}`)
		}
		return dir
	}
	deployment := func() map[string]any {
		t.Helper()
		r := u.ok("status", "cli-agent", "--json")
		var d map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
			t.Fatalf("status --json: %v\n%s", err, r.stdout)
		}
		return d
	}

	// 1. The first deploy creates the deployment, uploads, follows the
	// build and deploy, and prints the URL and an SDK line.
	r := u.ok("deploy", "testdata/cli-agent")
	wantURL := s.URL + "/agents/cli-agent"
	for _, want := range []string{"Created deployment cli-agent", "step 2/3: building", "build  | ", "Deployed cli-agent", "URL: " + wantURL, "SDK: "} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("deploy output lacks %q:\n%s", want, r.stdout)
		}
	}
	if got := servertest.Do(t, "GET", wantURL+"/ok", nil, "X-Api-Key", s.Key); got.Status != 200 {
		t.Fatalf("the deployed agent: %d %s", got.Status, got.Body)
	}
	rev1, _ := deployment()["active_revision_id"].(string)

	// 2. ls --json lists it, ready.
	var listed []map[string]any
	if err := json.Unmarshal([]byte(u.ok("ls", "--json").stdout), &listed); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0]["name"] != "cli-agent" || listed[0]["status"] != "READY" {
		t.Fatalf("ls --json: %v", listed)
	}

	// 3. A code change deploys as a new revision; what must never be
	// uploaded is left out.
	dir := project("cli-agent")
	base := ""
	if rt == "docker" && baseImage != "" {
		base = `"base_image": "` + baseImage + `", `
	}
	write(t, filepath.Join(dir, "langgraph.json"), `{`+base+`"graphs": {"agent": {"builtin": "echo"}, "other": {"builtin": "echo"}}}`)
	write(t, filepath.Join(dir, ".env"), "OPENAI_API_KEY=sk-local\n")
	write(t, filepath.Join(dir, "node_modules/dep/index.js"), "")
	write(t, filepath.Join(dir, "debug.log"), "")
	r = u.ok("deploy", dir, "--name", "cli-agent")
	if !strings.Contains(r.stdout, "left out .env, debug.log, node_modules") || !strings.Contains(r.stdout, "Updating deployment cli-agent") {
		t.Fatalf("second deploy:\n%s", r.stdout)
	}
	rev2, _ := deployment()["active_revision_id"].(string)
	if rev2 == "" || rev2 == rev1 {
		t.Fatalf("second deploy: active revision %q, first %q", rev2, rev1)
	}
	var revs []map[string]any
	if err := json.Unmarshal([]byte(u.ok("revisions", "cli-agent", "--json").stdout), &revs); err != nil {
		t.Fatal(err)
	}
	// Two deploys, two revisions: the first deploy leaves no SKIPPED
	// placeholder of the POST that created the deployment.
	if len(revs) != 2 || revs[0]["id"] != rev2 || revs[1]["id"] != rev1 {
		t.Fatalf("revisions: %v", revs)
	}

	// 4. rollback returns to the previous healthy revision.
	r = u.ok("rollback", "cli-agent")
	if got, _ := deployment()["active_revision_id"].(string); got != rev1 || !strings.Contains(r.stdout, "Deployed cli-agent") {
		t.Fatalf("after rollback the active revision is %q, want %q\n%s", got, rev1, r.stdout)
	}

	// 5. logs -f prints lines while the build writes them: the first line
	// arrives while the build is still running, before the second exists.
	// The 10 s between them is the time the CLI has to start following:
	// under CI's load 3 s was once not enough.
	if shellBuilds {
		r = u.ok("deploy", dir, "--name", "cli-agent", "--no-wait", "--json",
			"--build-command", "S=step; echo $S-one; sleep 10; echo $S-two") // the command as logged names neither line
		var queued struct {
			DeploymentID string `json:"deployment_id"`
			RevisionID   string `json:"revision_id"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &queued); err != nil || queued.RevisionID == "" {
			t.Fatalf("deploy --no-wait --json: %v\n%s", err, r.stdout)
		}
		// --build: the whole-deployment follow (-f alone) goes on with
		// the agent's output until interrupted.
		c := u.cmd("logs", "cli-agent", "-f", "--build")
		out, err := c.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		c.Stderr = &stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		var lines []string
		sawOne := false
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if strings.HasSuffix(sc.Text(), "step-one") {
				sawOne = true
				rev := s.Do("GET", "/v2/deployments/"+queued.DeploymentID+"/revisions/"+queued.RevisionID, nil).Map()
				logs := string(s.Do("GET", "/v2/deployments/"+queued.DeploymentID+"/revisions/"+queued.RevisionID+"/logs", nil).Body)
				if rev["status"] != "BUILDING" || strings.Contains(logs, "step-two") {
					t.Fatalf("logs -f showed step-one only once the build was over: status %v", rev["status"])
				}
			}
		}
		_, _ = io.Copy(io.Discard, out)
		if err := c.Wait(); err != nil {
			t.Fatalf("logs -f: %v\n%s", err, stderr.String())
		}
		if !sawOne || !strings.Contains(strings.Join(lines, "\n"), "step-two") {
			t.Fatalf("logs -f output:\n%s", strings.Join(lines, "\n"))
		}
	}

	// 6. A broken project exits non-zero and shows the build's error.
	if shellBuilds {
		start := time.Now()
		r = u.run("deploy", project("cli-broken"), "--build-command", "sh build.sh")
		if r.code != 1 || !strings.Contains(r.stderr, "error: cannot resolve module 'missing-dependency'") ||
			!strings.Contains(r.stderr, "the build failed (BUILD_FAILED)") {
			t.Fatalf("broken project: exit %d after %s\nstdout:\n%s\nstderr:\n%s", r.code, time.Since(start), r.stdout, r.stderr)
		}
		if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic") {
			t.Fatalf("a Go stack on stderr:\n%s", r.stderr)
		}
	}

	// 7. Bad input and refusals: one sentence with the server's detail and
	// the documented exit code.
	empty := t.TempDir()
	bad := &user{t: t, bin: u.bin, env: append(append([]string{}, u.env...), "SLIPWAY_API_KEY=not-a-key")}
	for _, c := range []struct {
		name string
		u    *user
		args []string
		code int
		want string
	}{
		{"no graph configuration", u, []string{"deploy", empty}, 2, "there is no graph configuration at " + filepath.Join(empty, "langgraph.json")},
		{"bad key", bad, []string{"ls"}, 4, "(401 from GET /v2/deployments): Invalid API key or token."},
		{"invalid name", u, []string{"deploy", "testdata/cli-agent", "--name", "Not A Name"}, 6, "(422 from POST /v2/deployments): body.name: "},
		{"no such deployment", u, []string{"logs", "nope"}, 5, `no deployment is named "nope"`},
		{"rm needs --yes without a terminal", u, []string{"rm", "cli-agent"}, 2, "pass --yes"},
		{"bad flag", u, []string{"ls", "--bogus"}, 2, "flag provided but not defined"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := c.u.run(c.args...)
			if r.code != c.code || !strings.Contains(r.stderr, c.want) {
				t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, c.code, r.stderr)
			}
			if strings.Contains(r.stderr, "goroutine ") {
				t.Fatalf("a Go stack on stderr:\n%s", r.stderr)
			}
		})
	}

	// 8. keys: create a service key, see it listed, use it, revoke it.
	r = u.ok("keys", "create", "--service", "--description", "ci pipeline", "--json")
	var key struct{ ID, Key string }
	if err := json.Unmarshal([]byte(r.stdout), &key); err != nil || !strings.HasPrefix(key.Key, "slw_") {
		t.Fatalf("keys create: %v\n%s", err, r.stdout)
	}
	if r = u.ok("keys"); !strings.Contains(r.stdout, key.ID) || !strings.Contains(r.stdout, "ci pipeline") {
		t.Fatalf("keys list:\n%s", r.stdout)
	}
	ci := &user{t: t, bin: u.bin, env: append(append([]string{}, u.env...), "SLIPWAY_API_KEY="+key.Key)}
	ci.ok("status", "cli-agent")
	u.ok("keys", "revoke", key.ID)
	if r = ci.run("status", "cli-agent"); r.code != 4 {
		t.Fatalf("a revoked key still works: exit %d %s", r.code, r.stderr)
	}

	// 9. login stores URL and key (0600) for commands run without them.
	bare := &user{t: t, bin: u.bin, env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config")}}
	login := bare.cmd("login", "--url", s.URL)
	login.Stdin = strings.NewReader(s.Key + "\n")
	if out, err := login.CombinedOutput(); err != nil {
		t.Fatalf("login: %v\n%s", err, out)
	}
	if fi, err := os.Stat(filepath.Join(home, ".config", "slipway", "config.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("login settings: %v %v", fi, err)
	}
	if r = bare.ok("ls"); !strings.Contains(r.stdout, "cli-agent") {
		t.Fatalf("ls after login:\n%s", r.stdout)
	}

	// 10. rm --yes deletes, and waits until it is gone.
	u.ok("rm", "cli-agent", "--yes")
	if shellBuilds {
		u.ok("rm", "cli-broken", "--yes")
	}
	if got := strings.TrimSpace(u.ok("ls", "--json").stdout); got != "[]" {
		t.Fatalf("ls --json after rm: %s", got)
	}
	if r := u.run("status", "cli-agent"); r.code != 5 {
		t.Fatalf("status after rm: exit %d %s", r.code, r.stderr)
	}
}
