package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestPackRefusesUnsafeNames packs directories holding a file, a directory
// or a link target whose name has a control character, invalid UTF-8 or a
// bidirectional override, which the server would refuse in the archive:
// the packer stops before uploading, names the file escaped (never its
// raw bytes, which could rewrite the terminal) and says how to go on; the
// same file left out by .gitignore is no obstacle, and other non-ASCII
// names pack.
func TestPackRefusesUnsafeNames(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		link  [2]string // a symbolic link to make: name, target
		want  []string  // in the error; none: it packs
	}{
		{name: "escape sequence in a file name", files: map[string]string{"langgraph.json": "{}", "src/\x1b[2Jok.py": ""},
			want: []string{`"src/\x1b[2Jok.py"`, "its name has a control character (U+001B at offset 4)", ".gitignore"}},
		{name: "newline in a directory name", files: map[string]string{"langgraph.json": "{}", "d\nx/f.py": ""},
			want: []string{`"d\nx"`, "U+000A"}},
		{name: "invalid UTF-8", files: map[string]string{"langgraph.json": "{}", "caf\xe9.py": ""},
			want: []string{`"caf\xe9.py"`, "invalid UTF-8"}},
		{name: "right-to-left override", files: map[string]string{"langgraph.json": "{}", "a\u202eyp.txt": ""},
			want: []string{`"a\u202eyp.txt"`, "bidirectional"}},
		{name: "link target", files: map[string]string{"langgraph.json": "{}"}, link: [2]string{"l", "x\x1b]0;t\x07"},
			want: []string{`"l"`, "the target of the link has a control character"}},
		{name: "left out by .gitignore", files: map[string]string{"langgraph.json": "{}", ".gitignore": "bad*\n", "bad\x1b.py": ""}},
		{name: "other non-ASCII names", files: map[string]string{"langgraph.json": "{}", "café/naïve_日本.py": ""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, tc.files)
			if tc.link[0] != "" {
				if err := os.Symlink(tc.link[1], filepath.Join(dir, tc.link[0])); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Pack(dir, &bytes.Buffer{})
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("packed")
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Fatalf("error %q does not say %q", msg, w)
				}
			}
			if !utf8.ValidString(msg) || strings.ContainsAny(msg, "\x1b\n\x07\u202e") {
				t.Fatalf("error carries the raw name: %q", msg)
			}
		})
	}
}

// TestPackShowsLeftOutNamesEscaped: a file .gitignore leaves out may have
// any name; the deploy's summary of what it left out shows it escaped.
func TestPackShowsLeftOutNamesEscaped(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"langgraph.json": "{}", ".gitignore": "bad*\n", "bad\x1b[2J.py": "", "debug.log": ""})
	archive, err := os.Create(filepath.Join(t.TempDir(), "a.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer archive.Close()
	var say bytes.Buffer
	if _, err := pack(&say, archive, ".", dir, "langgraph.json"); err != nil {
		t.Fatal(err)
	}
	if out := say.String(); !strings.Contains(out, `left out "bad\x1b[2J.py"`) || strings.Contains(out, "\x1b") {
		t.Fatalf("summary %q", out)
	}
}
