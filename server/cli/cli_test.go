package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseFlagsAnywhere(t *testing.T) {
	cases := []struct {
		args     []string
		wantPos  []string
		wantName string
		wantErr  string
	}{
		{args: []string{"./dir", "--name", "x"}, wantPos: []string{"./dir"}, wantName: "x"},
		{args: []string{"--name=x", "./dir"}, wantPos: []string{"./dir"}, wantName: "x"},
		{args: []string{"a", "-name", "x", "b"}, wantPos: []string{"a", "b"}, wantName: "x"},
		{args: []string{"--", "--name"}, wantPos: []string{"--name"}},
		{args: []string{"--nope"}, wantErr: "flag provided but not defined: -nope"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			a := &app{env: Env{Stderr: &bytes.Buffer{}}}
			fs := a.flags("deploy", "")
			name := fs.String("name", "", "")
			pos, err := parse(fs, c.args)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				if code, _ := describe(err); code != ExitUsage {
					t.Fatalf("exit %d, want %d", code, ExitUsage)
				}
				return
			}
			if err != nil || !slices.Equal(pos, c.wantPos) || *name != c.wantName {
				t.Fatalf("pos %q name %q err %v", pos, *name, err)
			}
		})
	}
}

func TestReadSecrets(t *testing.T) {
	dir := t.TempDir()
	envFile := filepath.Join(dir, ".env")
	os.WriteFile(envFile, []byte("# comment\nexport A=1\nB=\"two words\"\nC='x#y' # note\n"), 0o600)
	bad := filepath.Join(dir, "bad.env")
	os.WriteFile(bad, []byte("A=\"unterminated\n"), 0o600)
	cases := []struct {
		name    string
		file    string
		pairs   []string
		want    map[string]string
		wantErr string
	}{
		{name: "none", want: nil},
		{name: "env file", file: envFile, want: map[string]string{"A": "1", "B": "two words", "C": "x#y"}},
		{name: "flags win", file: envFile, pairs: []string{"A=9", "D=a=b"}, want: map[string]string{"A": "9", "B": "two words", "C": "x#y", "D": "a=b"}},
		{name: "no equals", pairs: []string{"A"}, wantErr: "NAME=VALUE"},
		{name: "missing file", file: filepath.Join(dir, "nope"), wantErr: "cannot read the env file"},
		{name: "bad file", file: bad, wantErr: "not in KEY=VALUE form"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := readSecrets(c.file, c.pairs)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil || len(got) != len(c.want) || (got == nil) != (c.want == nil) {
				t.Fatalf("got %v, %v; want %v", got, err, c.want)
			}
			for k, v := range c.want {
				if got[k] != v {
					t.Fatalf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

func TestReadGraphConfig(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"ok/langgraph.json": `{"graphs": {"b": "x", "a": {"builtin": "echo"}}}`,
		"empty/langgraph.json": `{"graphs": {}}`, "broken/langgraph.json": `{"graphs":`})
	cases := []struct {
		dir, rel string
		want     []string
		wantErr  string
	}{
		{dir: "ok", rel: "langgraph.json", want: []string{"a", "b"}},
		{dir: "missing", rel: "langgraph.json", wantErr: "there is no graph configuration"},
		{dir: "empty", rel: "langgraph.json", wantErr: "names no graphs"},
		{dir: "broken", rel: "langgraph.json", wantErr: "not valid JSON"},
		{dir: "ok", rel: "../ok/langgraph.json", wantErr: "must be a path inside"},
	}
	for _, c := range cases {
		t.Run(c.dir+"/"+c.rel, func(t *testing.T) {
			got, err := readGraphConfig(filepath.Join(dir, c.dir), c.rel)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				if code, _ := describe(err); code != ExitUsage {
					t.Fatalf("exit %d", code)
				}
				return
			}
			if err != nil || !slices.Equal(got.Names, c.want) {
				t.Fatalf("got %v, %v", got, err)
			}
		})
	}
}

func TestDefaultName(t *testing.T) {
	for in, want := range map[string]string{
		"my-agent": "my-agent", "My_Agent": "my-agent", "  x  ": "x", "__": "agent",
		"a..b--c": "a-b-c", strings.Repeat("a", 70): strings.Repeat("a", 63),
	} {
		if got := defaultName(in); got != want {
			t.Errorf("defaultName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRevisionChoice(t *testing.T) {
	revs := []Revision{ // newest first, as the server lists them
		{ID: "01a2-0004-aaaa1111", Status: "BUILD_FAILED"},
		{ID: "01a2-0003-bbbb2222", Status: "DEPLOYED"},
		{ID: "01a2-0002-cccc3333", Status: "DEPLOY_FAILED"},
		{ID: "01a2-0001-dddd4444", Status: "DEPLOYED"},
	}
	cases := []struct {
		name, active, ref string
		want              string
		wantCode          int
	}{
		{name: "previous healthy skips failures", active: "01a2-0003-bbbb2222", want: "01a2-0001-dddd4444"},
		{name: "nothing older deployed", active: "01a2-0001-dddd4444", wantCode: ExitNotFound},
		{name: "active not listed", active: "zzz", wantCode: ExitNotFound},
		{name: "full id", ref: "01a2-0002-cccc3333", want: "01a2-0002-cccc3333"},
		{name: "suffix as tables print", ref: "cccc3333", want: "01a2-0002-cccc3333"},
		{name: "prefix", ref: "01a2-0004", want: "01a2-0004-aaaa1111"},
		{name: "ambiguous", ref: "01a2", wantCode: ExitUsage},
		{name: "too short to guess", ref: "333", wantCode: ExitNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r *Revision
			var err error
			if c.ref != "" {
				r, err = findRevision(revs, c.ref)
			} else {
				r, err = previousHealthy(revs, c.active)
			}
			if c.wantCode != 0 {
				if code, _ := describe(err); err == nil || code != c.wantCode {
					t.Fatalf("got %v, %v; want exit %d", r, err, c.wantCode)
				}
				return
			}
			if err != nil || r.ID != c.want {
				t.Fatalf("got %v, %v; want %s", r, err, c.want)
			}
		})
	}
}

func TestParseExpiry(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := map[string]time.Time{
		"30d": now.AddDate(0, 0, 30), "12h": now.Add(12 * time.Hour),
		"2026-02-01T00:00:00Z": time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC),
		"0d":                   {}, "-1h": {}, "soon": {}, "1.5d": {},
	}
	for in, want := range cases {
		got, err := parseExpiry(in, now)
		if want.IsZero() != (err != nil) || !got.Equal(want) {
			t.Errorf("parseExpiry(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

func TestDetailOf(t *testing.T) {
	cases := map[string]string{
		`{"detail": "Deployment ID x not found."}`: "Deployment ID x not found.",
		`{"detail": [{"loc": ["body", "name"], "msg": "bad", "type": "x"}, {"loc": ["query", 0], "msg": "worse"}]}`: "body.name: bad; query.0: worse",
		`not json`:               "not json",
		`{"detail": {"odd": 1}}`: `{"odd": 1}`,
	}
	for in, want := range cases {
		if got := detailOf([]byte(in)); got != want {
			t.Errorf("detailOf(%s) = %q, want %q", in, got, want)
		}
	}
}

// FuzzDetailOf: error bodies come from whatever answers at the URL.
func FuzzDetailOf(f *testing.F) {
	f.Add([]byte(`{"detail": [{"loc": ["body"], "msg": "m"}]}`))
	f.Add([]byte(`{"detail": "x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = detailOf(b)
	})
}

// TestSettingsPrecedence: flags win over the environment, which wins over
// the file `slipway login` wrote, which wins over the default; the file is
// written 0600.
func TestSettingsPrecedence(t *testing.T) {
	cfgDir := t.TempDir()
	path := filepath.Join(cfgDir, "slipway", "config.json")
	if err := saveConfig(path, fileConfig{URL: "http://file:1", APIKey: "file-key", Workspace: "file-ws"}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config file: %v %v", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("config dir: %v %v", fi.Mode(), err)
	}
	cases := []struct {
		name            string
		flags           []string
		env             map[string]string
		url, key, wsHdr string
	}{
		{name: "file", url: "http://file:1", key: "file-key", wsHdr: "file-ws"},
		{name: "env over file", env: map[string]string{"SLIPWAY_URL": "http://env:2/", "SLIPWAY_API_KEY": "env-key"}, url: "http://env:2", key: "env-key", wsHdr: "file-ws"},
		{name: "flags over env", flags: []string{"--url", "http://flag:3", "--api-key", "flag-key", "--workspace", "w"},
			env: map[string]string{"SLIPWAY_URL": "http://env:2", "SLIPWAY_API_KEY": "env-key"}, url: "http://flag:3", key: "flag-key", wsHdr: "w"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := &app{env: Env{Stderr: &bytes.Buffer{}, ConfigDir: cfgDir, Getenv: func(k string) string { return c.env[k] }}}
			if _, err := parse(a.flags("ls", ""), c.flags); err != nil {
				t.Fatal(err)
			}
			if err := a.connect(); err != nil {
				t.Fatal(err)
			}
			if a.client.BaseURL != c.url || a.client.APIKey != c.key || a.client.Workspace != c.wsHdr {
				t.Fatalf("got %+v", a.client)
			}
		})
	}
	t.Run("default", func(t *testing.T) {
		a := &app{env: Env{Stderr: &bytes.Buffer{}, ConfigDir: t.TempDir(), Getenv: func(string) string { return "" }}}
		if err := a.connect(); err != nil || a.client.BaseURL != DefaultURL || a.client.APIKey != "" {
			t.Fatalf("got %+v, %v", a.client, err)
		}
	})
}

// TestUnreachable: nothing listening is exit 3 and one sentence.
func TestUnreachable(t *testing.T) {
	var stderr bytes.Buffer
	env := Env{Stdout: &bytes.Buffer{}, Stderr: &stderr, ConfigDir: t.TempDir(),
		Getenv: func(k string) string { return map[string]string{"SLIPWAY_URL": "http://127.0.0.1:1"}[k] }}
	if code := Main(context.Background(), "ls", nil, env); code != ExitUnreachable {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if got := strings.TrimSpace(stderr.String()); strings.Count(got, "\n") != 0 || !strings.Contains(got, "cannot reach the server at http://127.0.0.1:1") {
		t.Fatalf("stderr: %q", got)
	}
}
