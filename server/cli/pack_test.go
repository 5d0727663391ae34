package cli

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// writeTree creates files (a name ending in "/" is an empty directory).
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// packedFiles packs dir and returns the regular files in the archive.
func packedFiles(t *testing.T, dir string) []string {
	t.Helper()
	var buf bytes.Buffer
	if _, err := Pack(dir, &buf); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var out []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			out = append(out, h.Name)
		}
	}
	sort.Strings(out)
	return out
}

func TestPack(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{
			name: "never packed whatever the ignore files say",
			files: map[string]string{
				"langgraph.json": "{}", ".env": "K=V", ".env.local": "K=V", ".env.example": "K=",
				"node_modules/x/index.js": "", "web/node_modules/y.js": "", ".git/config": "",
				".venv/bin/python": "", "venv/lib/x.py": "", "env3/pyvenv.cfg": "", "env3/lib/y.py": "",
				"src/.env": "K=V", "src/app.py": "",
				".gitignore": "!node_modules\n!.env\n",
			},
			want: []string{".env.example", ".gitignore", "langgraph.json", "src/app.py"},
		},
		{
			name: "gitignore at every level, scoped to its directory",
			files: map[string]string{
				".gitignore": "*.log\n/build\ndist/\n", "a.log": "", "keep.txt": "", "build/out": "",
				"sub/build/out": "", "sub/dist/x": "", "dist": "x",
				"sub/.gitignore": "*.tmp\n!important.log\n", "sub/x.tmp": "", "sub/important.log": "", "y.tmp": "",
			},
			// "dist" the file stays (dist/ names directories); sub's
			// negation re-includes a file its parent's rules excluded.
			want: []string{".gitignore", "dist", "keep.txt", "sub/.gitignore", "sub/build/out", "sub/important.log", "y.tmp"},
		},
		{
			name: "anchored patterns with a slash inside, as git reads them",
			files: map[string]string{
				".gitignore": "doc/frotz\nca?e.txt\n", "doc/frotz": "", "a/doc/frotz": "", "case.txt": "", "cave.txt": "", "cat.txt": "",
			},
			want: []string{".gitignore", "a/doc/frotz", "cat.txt"},
		},
		{
			name: "dockerignore at the root, relative to the root, with exceptions",
			files: map[string]string{
				".dockerignore": "tests\n**/*.md\n!README.md\ndata/*\n!data/keep\n", "tests/t.py": "", "src/tests/t.py": "",
				"README.md": "", "docs/x.md": "", "data/a": "", "data/keep": "", "main.py": "",
			},
			want: []string{".dockerignore", "README.md", "data/keep", "main.py", "src/tests/t.py"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, c.files)
			if got := packedFiles(t, dir); !slices.Equal(got, c.want) {
				t.Fatalf("packed %q\nwant   %q", got, c.want)
			}
		})
	}
}

// TestPackAgreesWithGit packs a tree with nested .gitignore files and
// compares with what git itself would add.
func TestPackAgreesWithGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		".gitignore":     "*.pyc\n/out/\nlogs/**\n!logs/keep/\n**/cache\n*.[ab]\n\\#hash\ntrailing \n",
		"app/.gitignore": "gen/\n!*.keep.pyc\n/local.txt\n",
		"a.pyc":          "", "app/b.pyc": "", "app/c.keep.pyc": "", "app/gen/x.go": "", "app/local.txt": "",
		"app/sub/local.txt": "", "out/o": "", "app/out/o": "", "logs/x": "", "logs/keep/y": "", "x/cache/z": "",
		"f.a": "", "f.c": "", "#hash": "", "trailing": "", "langgraph.json": "{}", "app/main.py": "",
	})
	cmd := exec.Command("sh", "-c", "git init -q . && git ls-files --others --exclude-standard")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git: %v", err)
	}
	want := strings.Fields(string(out))
	sort.Strings(want)
	if got := packedFiles(t, dir); !slices.Equal(got, want) {
		t.Fatalf("packed %q\ngit    %q", got, want)
	}
}
