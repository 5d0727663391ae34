package process

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"slipway/runtime"
)

// TestBuildErrorsQuoteNothing: a build that fails on a project file
// (a missing, unreadable or malformed env file, a missing dependency, a
// broken archive) says which file and which line, relative to the source,
// and neither what the file holds nor any path of Slipway's: the error
// becomes the revision's status and a line of its log, which every member
// of the workspace reads. godotenv's own message quoted the rest of the
// file ("near ..."), and os errors named the file by its absolute path in
// the data directory.
func TestBuildErrorsQuoteNothing(t *testing.T) {
	d := newDriver(t)
	const secret = "sktest51HxYzSECRETSECRET"
	base := map[string]string{"conf/.keep": ""}
	cases := []struct {
		name   string
		config string
		files  map[string]string
		want   string // part of the error
	}{
		{"malformed env file", `{"env": "conf/app.env"}`, map[string]string{"conf/app.env": "A=1\nOPENAI_API_KEY " + secret + "\n"},
			"env file conf/app.env: line 2: expected a variable name"},
		{"env file without a name", `{"env": "conf/app.env"}`, map[string]string{"conf/app.env": secret}, "env file conf/app.env: a line has no variable name"},
		{"unclosed quote", `{"env": "conf/app.env"}`, map[string]string{"conf/app.env": "A=\"" + secret + "\n"}, "env file conf/app.env: line 1: a quoted value is not closed"},
		{"env file that is a directory", `{"env": "conf"}`, nil, "conf is not a regular file"},
		{"missing dependency", `{"dependencies": ["./nope"], "python_version": "3.11"}`, nil, `dependency "./nope" is not a directory of the source`},
		{"bad pyproject", `{"dependencies": ["./lib"], "python_version": "3.11"}`, map[string]string{"lib/pyproject.toml": "[project]\ndependencies = " + secret + "\n"},
			"lib/pyproject.toml: line 2: not valid TOML"},
		{"bad graph configuration", "{\n\"graphs\": " + secret + "}", nil, "line 2: not valid JSON"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{}
			for k, v := range base {
				files[k] = v
			}
			for k, v := range tc.files {
				files[k] = v
			}
			s := spec(t, "e"+string(rune('a'+i)), tc.config, files)
			var log bytes.Buffer
			_, err := d.Build(context.Background(), s, &log)
			if err == nil {
				t.Fatal("built")
			}
			checkQuotesNothing(t, d, err.Error()+"\n"+log.String(), secret)
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
	// The archive itself: missing (a lost upload) and not gzip.
	for name, prep := range map[string]func(p string) error{
		"missing archive": os.Remove,
		"corrupt archive": func(p string) error { return os.WriteFile(p, []byte(secret), 0o600) },
	} {
		t.Run(name, func(t *testing.T) {
			s := spec(t, "arch-"+strings.Fields(name)[0], "{}", nil)
			if err := prep(s.TarballPath); err != nil {
				t.Fatal(err)
			}
			var log bytes.Buffer
			_, err := d.Build(context.Background(), s, &log)
			if err == nil {
				t.Fatal("built")
			}
			checkQuotesNothing(t, d, err.Error()+"\n"+log.String(), secret)
			if strings.Contains(err.Error(), filepath.Dir(s.TarballPath)) {
				t.Errorf("the error names the archive's path: %v", err)
			}
		})
	}
	// Slipway's own paths, wherever an error still holds one, are said
	// relative to the revision.
	s := runtime.Spec{DeploymentID: "dep1", RevisionID: "r9"}
	rev := d.revDir("dep1", "r9")
	for in, want := range map[string]string{
		"open " + filepath.Join(rev, "app", "x.py") + ": denied": "open x.py: denied",
		"clear " + filepath.Join(rev, "venv"):                    "clear <revision>/venv",
		"stat " + filepath.Join(d.DataDir, "master.key"):         "stat <data dir>/master.key",
	} {
		if got := d.public(s, errString(in)).Error(); got != want {
			t.Errorf("public(%q) = %q, want %q", in, got, want)
		}
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func checkQuotesNothing(t *testing.T, d *Driver, text, secret string) {
	t.Helper()
	for _, bad := range []string{secret, d.DataDir, d.Root} {
		if strings.Contains(text, bad) {
			t.Errorf("the error or the log holds %q:\n%s", bad, text)
		}
	}
	t.Log(strings.TrimSpace(text))
}

// TestMissingEnvFileLoadsNothing: as the reference servers, an env file the
// configuration names but the source lacks (every official template names
// a .env, which deploy clients never upload) loads nothing; the build goes
// on and its log says why nothing was loaded.
func TestMissingEnvFileLoadsNothing(t *testing.T) {
	d := newDriver(t)
	s := spec(t, "noenv", `{"graphs": {"agent": "echo"}, "env": ".env"}`, map[string]string{"conf/.keep": ""})
	var log bytes.Buffer
	if _, err := d.Build(context.Background(), s, &log); err != nil {
		t.Fatalf("build: %v\n%s", err, log.String())
	}
	if want := "note: env file .env: not in the uploaded source"; !strings.Contains(log.String(), want) {
		t.Fatalf("the build log does not say %q:\n%s", want, log.String())
	}
}
