package cli_test

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"slipway/server/apptest"
	"slipway/server/cli"
)

// TestUsersAdd adds users with `slipway users add` as an administrator
// would, then signs in as each: an Editor can create a deployment, a
// Viewer cannot but can search the agent API, and `slipway users list`
// shows both with their roles. Bad input is a usage error that names the
// roles; an email already taken is refused.
func TestUsersAdd(t *testing.T) {
	s := apptest.New(t, nil)
	run := func(stdin string, args ...string) (code int, stdout, stderr string) {
		var out, errb bytes.Buffer
		env := cli.Env{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, ConfigDir: t.TempDir(),
			Getenv: func(k string) string {
				return map[string]string{"SLIPWAY_URL": s.URL, "SLIPWAY_API_KEY": s.Key}[k]
			}}
		code = cli.Main(context.Background(), "users", args, env)
		return code, out.String(), errb.String()
	}
	login := func(email, password string) string {
		t.Helper()
		r := s.Do("POST", "/api/v1/login", map[string]any{"email": email, "password": password}, "X-Api-Key", "")
		tok, _ := r.Map()["access_token"].(string)
		if tok == "" {
			t.Fatalf("login as %s: %d %s", email, r.Status, r.Body)
		}
		return tok
	}

	// A generated password, printed once on stdout.
	code, out, errOut := run("", "add", "editor@example.com", "--role", "editor", "--name", "Eddie")
	if code != cli.ExitOK {
		t.Fatalf("users add: exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "Organization User, workspace role Editor: deploys and runs agents") {
		t.Errorf("users add does not say what the role allows: %q", errOut)
	}
	editor := login("editor@example.com", strings.TrimSpace(out))
	// A password from stdin; nothing printed on stdout.
	code, out, errOut = run("viewer-password-1\n", "add", "viewer@example.com", "--role", "Viewer", "--password-stdin")
	if code != cli.ExitOK || out != "" {
		t.Fatalf("users add --password-stdin: exit %d, stdout %q: %s", code, out, errOut)
	}
	viewer := login("viewer@example.com", "viewer-password-1")

	create := map[string]any{"name": "by-editor", "source": "internal_source", "source_config": map[string]any{},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}, "secrets": []any{}}
	if r := s.Do("POST", "/v2/deployments", create, "X-Api-Key", "", "Authorization", "Bearer "+editor); r.Status != 201 {
		t.Errorf("an Editor creates a deployment: %d %s", r.Status, r.Body)
	}
	create["name"] = "by-viewer"
	if r := s.Do("POST", "/v2/deployments", create, "X-Api-Key", "", "Authorization", "Bearer "+viewer); r.Status != 403 {
		t.Errorf("a Viewer creates a deployment: %d %s, want 403", r.Status, r.Body)
	}
	if r := s.Do("POST", "/agents/by-editor/threads/search", map[string]any{}, "X-Api-Key", "", "Authorization", "Bearer "+viewer); r.Status == 403 || r.Status == 401 {
		t.Errorf("a Viewer searches a deployment's threads: %d %s", r.Status, r.Body)
	}

	code, out, errOut = run("", "list")
	if code != cli.ExitOK {
		t.Fatalf("users list: exit %d: %s", code, errOut)
	}
	for _, want := range []string{`(?m)^editor@example\.com\s+Eddie\s+Organization User\s+Editor\s+email-password$`,
		`(?m)^viewer@example\.com\s+\S+\s+Organization User\s+Viewer\s+email-password$`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("users list has no row matching %s:\n%s", want, out)
		}
	}

	for _, tc := range []struct {
		name   string
		stdin  string
		args   []string
		code   int
		stderr string
	}{
		{"no role", "", []string{"add", "x@example.com"}, cli.ExitUsage, "users add needs --role: admin, editor or viewer"},
		{"unknown role", "", []string{"add", "x@example.com", "--role", "owner"}, cli.ExitUsage, `no workspace role "owner": the roles are admin, editor, viewer`},
		{"unknown organization role", "", []string{"add", "x@example.com", "--role", "viewer", "--org-role", "boss"}, cli.ExitUsage, "the roles are admin, operator, user, viewer"},
		{"no email", "", []string{"add", "--role", "viewer"}, cli.ExitUsage, "one email address"},
		{"empty stdin", "", []string{"add", "x@example.com", "--role", "viewer", "--password-stdin"}, cli.ExitUsage, "holds no password"},
		{"email taken", "", []string{"add", "editor@example.com", "--role", "viewer"}, cli.ExitRefused, "already"},
		{"unknown action", "", []string{"remove"}, cli.ExitUsage, "use list or add"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := run(tc.stdin, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.stderr) {
				t.Fatalf("exit %d, stderr %q; want exit %d saying %q", code, errOut, tc.code, tc.stderr)
			}
		})
	}
}
