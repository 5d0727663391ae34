package build

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"slipway/runtime/build/swaprace"
)

// secretText is what the files outside a tree hold: no error or result
// may ever contain it.
const secretText = "0123abcdef-outside-secret-do-not-read"

// outsideDir makes a directory beside the tree with files that links from
// the tree lead to, and watches it: opened reports every open, read or
// listing of it or of anything in it since the watch began.
func outsideDir(t *testing.T) (dir string, opened func() []string) {
	t.Helper()
	dir = t.TempDir()
	for _, name := range []string{"master.key", "langgraph.json", "requirements.txt", "pyproject.toml", "package.json", "app.env", "setup.py"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(secretText+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, swaprace.Watch(t, dir)
}

// bothResolvers runs f with openat2 and with the component walk used on
// kernels without it.
func bothResolvers(t *testing.T, f func(t *testing.T)) {
	for _, walk := range []bool{false, true} {
		name := "openat2"
		if walk {
			name = "component walk"
		}
		t.Run(name, func(t *testing.T) {
			old := noOpenat2.Load()
			noOpenat2.Store(walk)
			t.Cleanup(func() { noOpenat2.Store(old) })
			f(t)
		})
	}
}

// TestTreeRefusesLinksOut: a link in the tree that leads out of it, as the
// file itself or as a directory on its way, and a link that stays inside,
// are refused by every reader, which never opens, reads or lists what the
// link leads to; errors name the file relative to the tree and hold
// neither the tree's absolute path nor anything of the target.
func TestTreeRefusesLinksOut(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		out, opened := outsideDir(t)
		dir := writeTree(t, map[string]string{"real/x.txt": "inside\n", "langgraph.json": "{}"})
		links := map[string]string{
			"app.env":       filepath.Join(out, "app.env"), // the file itself, absolute
			"rel.env":       "../../" + filepath.Base(filepath.Dir(out)) + "/" + filepath.Base(out) + "/app.env",
			"conf":          out, // a directory on the way
			"dep":           out,
			"inside.txt":    "real/x.txt", // stays inside: still a link
			"insidedir":     "real",
			"node/pkg.json": filepath.Join(out, "package.json"),
		}
		for name, target := range links {
			p := filepath.Join(dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
		}
		tr := openTree(t, dir)
		opened() // what setting up did
		for _, tc := range []struct {
			what string
			call func() (any, error)
		}{
			{"ReadFile of a link", func() (any, error) { return tr.ReadFile("app.env", 0) }},
			{"ReadFile of a relative link", func() (any, error) { return tr.ReadFile("rel.env", 0) }},
			{"ReadFile through a linked directory", func() (any, error) { return tr.ReadFile("conf/master.key", 0) }},
			{"ReadFile of a link that stays inside", func() (any, error) { return tr.ReadFile("inside.txt", 0) }},
			{"ReadFile through a directory link that stays inside", func() (any, error) { return tr.ReadFile("insidedir/x.txt", 0) }},
			{"Open through a linked directory", func() (any, error) { return tr.Open("conf/langgraph.json") }},
			{"ReadDir of a linked directory", func() (any, error) { return tr.ReadDir("conf") }},
			{"ReadDir through a linked directory", func() (any, error) { return tr.ReadDir("conf/bin") }},
			{"Lstat through a linked directory", func() (any, error) { return tr.Lstat("conf/master.key") }},
			{"ReadFile with ..", func() (any, error) { return tr.ReadFile("../x", 0) }},
			{"ReadFile absolute", func() (any, error) { return tr.ReadFile(filepath.Join(out, "app.env"), 0) }},
			{"LoadProject through a linked directory", func() (any, error) { p, _, err := LoadProject(tr, "conf/langgraph.json"); return p, err }},
			{"Env through a linked directory", func() (any, error) {
				p, _ := ParseProject([]byte(`{"env": "./conf/app.env"}`))
				return p.Env(tr, ".")
			}},
			{"Env of a link", func() (any, error) { p, _ := ParseProject([]byte(`{"env": "app.env"}`)); return p.Env(tr, ".") }},
			{"Env from a linked config directory", func() (any, error) { p, _ := ParseProject([]byte(`{"env": "app.env"}`)); return p.Env(tr, "conf") }},
			{"PythonPlan of a linked dependency", func() (any, error) {
				p, _ := ParseProject([]byte(`{"dependencies": ["./dep"]}`))
				return p.PythonPlan(tr, ".")
			}},
			{"PythonPlan from a linked config directory", func() (any, error) {
				p, _ := ParseProject([]byte(`{"dependencies": ["."], "pip_config_file": "requirements.txt"}`))
				return p.PythonPlan(tr, "conf")
			}},
		} {
			t.Run(tc.what, func(t *testing.T) {
				got, err := tc.call()
				if err == nil {
					t.Fatalf("accepted: %v", got)
				}
				msg := err.Error()
				if strings.Contains(msg, secretText) || strings.Contains(msg, dir) || strings.Contains(msg, out) {
					t.Errorf("the error holds the target's content or an absolute path: %s", msg)
				}
				if o := opened(); len(o) > 0 {
					t.Errorf("opened outside the tree: %v (error: %s)", o, msg)
				}
				t.Log(msg)
			})
		}
		// A link is reported by Lstat and Readlink as a link, not followed.
		if st, err := tr.Lstat("conf"); err != nil || st.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("Lstat of a link: %v, %v", st, err)
		}
		if target, err := tr.Readlink("conf"); err != nil || target != out {
			t.Errorf("Readlink: %q, %v", target, err)
		}
		// JSLock sees the names, never what they lead to.
		if _, _, _, ok := JSLock(tr, "conf"); ok {
			t.Error("JSLock found a package.json through a linked directory")
		}
		// Walking lists links as links and does not descend into them.
		var walked []string
		if err := tr.WalkDir(".", func(rel string, d fs.DirEntry) error { walked = append(walked, rel); return nil }); err != nil {
			t.Fatal(err)
		}
		if o := opened(); len(o) > 0 {
			t.Errorf("WalkDir opened outside the tree: %v (walked %v)", o, walked)
		}
		// The control: regular files of the tree are read.
		if raw, err := tr.ReadFile("real/x.txt", 0); err != nil || string(raw) != "inside\n" {
			t.Fatalf("a regular file of the tree: %q, %v", raw, err)
		}
	})
}

// TestTreeSurvivesSwappedDirectory: once open, the tree is its directory,
// not its path: swapping the path for a link elsewhere changes nothing.
func TestTreeSurvivesSwappedDirectory(t *testing.T) {
	out, opened := outsideDir(t)
	parent := t.TempDir()
	dir := filepath.Join(parent, "app")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "master.key"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr := openTree(t, dir)
	if err := os.Rename(dir, dir+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(out, dir); err != nil {
		t.Fatal(err)
	}
	opened()
	raw, err := tr.ReadFile("master.key", 0)
	if err != nil || string(raw) != "mine\n" {
		t.Fatalf("read %q, %v", raw, err)
	}
	if o := opened(); len(o) > 0 {
		t.Fatalf("opened outside the tree: %v", o)
	}
	// Opening a tree refuses a link.
	if _, err := OpenTree(dir); err == nil || strings.Contains(err.Error(), parent) {
		t.Fatalf("OpenTree of a link: %v", err)
	}
}

// TestTreeReadFile covers the regular-file checks and the size bound.
func TestTreeReadFile(t *testing.T) {
	dir := writeTree(t, map[string]string{"small": "12345", "big": strings.Repeat("x", 100), "d/e": ""})
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr := openTree(t, dir)
	for _, tc := range []struct {
		name string
		max  int64
		bad  string
	}{
		{"small", 10, ""},
		{"big", 10, "big is too large"},
		{"d", 0, "d is not a regular file"},
		{"fifo", 0, "fifo is not a regular file"},
		{"missing", 0, "missing is not in the source"},
		{"d/e/f", 0, "a directory on its path is not a directory"},
		{"/etc/passwd", 0, "a path that is not inside the source"},
	} {
		_, err := tr.ReadFile(tc.name, tc.max)
		if tc.bad == "" && err != nil || tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.bad)
		}
		if err != nil && strings.Contains(err.Error(), dir) {
			t.Errorf("%s: the error names the tree's path: %v", tc.name, err)
		}
	}
	if _, err := tr.ReadFile("missing", 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file is not fs.ErrNotExist: %v", err)
	}
}

// TestTreeChown: the tree is handed over from descriptors, never through
// a link: a link to a file outside, and a directory swapped for a link to
// one, leave what is outside untouched.
func TestTreeChown(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: chown to another uid needs root")
	}
	const uid = 200123
	out, _ := outsideDir(t)
	dir := writeTree(t, map[string]string{"a/b/c.txt": "x", "top.txt": "y"})
	if err := os.Symlink(filepath.Join(out, "master.key"), filepath.Join(dir, "a", "key")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(out, filepath.Join(dir, "outdir")); err != nil {
		t.Fatal(err)
	}
	tr := openTree(t, dir)
	if err := tr.Chown(uid, uid); err != nil {
		t.Fatal(err)
	}
	owner := func(p string) int {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		return int(st.Uid)
	}
	for _, p := range []string{".", "a", "a/b", "a/b/c.txt", "top.txt", "a/key", "outdir"} {
		if got := owner(filepath.Join(dir, p)); got != uid {
			t.Errorf("%s is owned by %d, want %d", p, got, uid)
		}
	}
	for _, p := range []string{out, filepath.Join(out, "master.key"), filepath.Join(out, "bin")} {
		if got := owner(p); got == uid {
			t.Errorf("%s, outside the tree, was handed over", p)
		}
	}
	if got, err := tr.Owner(); err != nil || got != uid {
		t.Errorf("Owner: %d, %v", got, err)
	}
}

// TestEnvErrorsQuoteNothing: a missing, unreadable or malformed env file
// fails with the file's name relative to the source and the line, never
// with what the file holds nor the source's absolute path (godotenv's own
// message quotes the rest of the file "near" the error).
func TestEnvErrorsQuoteNothing(t *testing.T) {
	const secret = "sk-live-4242-very-secret"
	dir := writeTree(t, map[string]string{
		"conf/bad-name.env":   "A=1\n# fine\nB=2\n" + secret + "\n",
		"conf/unclosed.env":   "A=1\r\nB=\"" + secret + "\nC=3\n",
		"conf/noname.env":     "abcdef0123456789",
		"conf/key.env":        "abcdef0123456789\n",
		"conf/dir.env/x":      "",
		"conf/good.env":       "A=" + secret + "\n",
		"conf/name-char.env":  "A=1\nB-" + secret + "=2\n",
		"conf/sub/langgraph":  "",
		"conf/langgraph.json": "{}",
	})
	tr := openTree(t, dir)
	for _, tc := range []struct {
		env  string
		want string
	}{
		{"bad-name.env", "env file conf/bad-name.env: line 4: expected a variable name"},
		{"unclosed.env", "env file conf/unclosed.env: line 2: a quoted value is not closed"},
		{"noname.env", "env file conf/noname.env: a line has no variable name"},
		{"key.env", "env file conf/key.env: line 1: expected a variable name"},
		{"name-char.env", "env file conf/name-char.env: line 2: expected a variable name"},
		{"missing.env", "env file conf/missing.env: not in the uploaded source"},
		{"dir.env", "env file: conf/dir.env is not a regular file"},
		{"sub/langgraph", ""},
	} {
		p, err := ParseProject([]byte(`{"env": "` + tc.env + `"}`))
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Env(tr, "conf")
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.env, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.env, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "abcdef") || strings.Contains(err.Error(), dir) {
			t.Errorf("%s: the error quotes the file or the tree's path: %v", tc.env, err)
		}
	}
	// The other parsers say where too, not what.
	if _, err := ParseProject([]byte("{\n\"graphs\": {},\n\"x\": " + secret + "\n}")); err == nil || !strings.Contains(err.Error(), "line 3") || strings.Contains(err.Error(), "'s'") {
		t.Errorf("JSON error: %v", err)
	}
	if _, err := PyprojectDependencies([]byte("[project]\nname = \"x\"\ndependencies = " + secret + "\n")); err == nil || !strings.Contains(err.Error(), "line 3") || strings.Contains(err.Error(), secret) {
		t.Errorf("TOML error: %v", err)
	}
}
