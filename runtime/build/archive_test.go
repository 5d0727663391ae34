package build

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// gz compresses raw as one gzip member.
func gz(t testing.TB, raw []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// plainTar is the uncompressed tar of entries, ending with tar.Writer's
// end-of-archive marker (two zero blocks) and no padding.
func plainTar(t testing.TB, entries ...entry) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(archive(t, entries...)))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestUnpackStreamEnd unpacks archives whose gzip stream is cut short,
// corrupt, or followed by more: each must be refused, though archive/tar
// alone reads every entry of most of them and stops at the tar's
// end-of-archive marker without ever reading the gzip trailer; the
// padding tar writers add after the marker is accepted.
func TestUnpackStreamEnd(t *testing.T) {
	files := []entry{{name: "langgraph.json", body: `{"graphs": {}}`}, {name: "src/agent.py", body: strings.Repeat("x = 1\n", 200)}}
	good := archive(t, files...)
	tarball := plainTar(t, files...)
	cut := func(n int) []byte { return append([]byte(nil), good[:len(good)-n]...) }
	flip := func(i int) []byte {
		b := append([]byte(nil), good...)
		b[len(b)+i] ^= 0xff
		return b
	}
	cases := []struct {
		name string
		raw  []byte
		want string // in the error; "" accepts
	}{
		{"whole", good, ""},
		{"tar padded to its 10 KiB record", gz(t, append(append([]byte(nil), tarball...), make([]byte, 10240-len(tarball)%10240)...)), ""},
		{"no end-of-archive marker, gzip whole", gz(t, tarball[:len(tarball)-1024]), ""},
		{"trailer missing", cut(8), "truncated"},
		{"trailer cut in its length", cut(3), "truncated"},
		{"trailer cut in its checksum", cut(6), "truncated"},
		{"checksum wrong", flip(-8), "corrupt"},
		{"length wrong", flip(-1), "corrupt"},
		{"cut in a file's data", append([]byte(nil), good[:len(good)/2]...), "truncated"},
		{"garbage after the gzip stream", append(append([]byte(nil), good...), "some garbage after it"...), "follows the end of the gzip stream"},
		{"a second archive as a second gzip member", append(append([]byte(nil), good...), archive(t, entry{name: "hidden.py", body: "evil"})...),
			"follows the end of the tar archive"},
		{"data after the end-of-archive marker", gz(t, append(append([]byte(nil), tarball...), "hidden"...)), "follows the end of the tar archive"},
		{"more than 1 MiB of zeros after the marker", gz(t, append(append([]byte(nil), tarball...), make([]byte, 1<<20+1)...)), "more than 1048576 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			err := UnpackReader(bytes.NewReader(tc.raw), filepath.Join(parent, "app"), DefaultLimits)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want ErrUnsafe saying %q", err, tc.want)
			}
			assertOnlyApp(t, parent)
		})
	}
}

// TestArchiveNames unpacks archives whose entry names or link targets hold
// control characters, invalid UTF-8 or bidirectional overrides: each is
// refused with an error that describes the character and shows the name
// escaped, never its raw bytes; other non-ASCII names are fine.
func TestArchiveNames(t *testing.T) {
	cases := []struct {
		name    string
		entries []entry
		want    string // in the error; "" accepts
	}{
		{"escape sequence", []entry{{name: "src/\x1b[2J\x1b[31mok.py", body: "x"}}, "U+001B"},
		{"newline forging a log line", []entry{{name: "a\nBuild succeeded.py", body: "x"}}, "U+000A"},
		{"carriage return", []entry{{name: "a\rb", body: "x"}}, "U+000D"},
		{"tab", []entry{{name: "a\tb", body: "x"}}, "U+0009"},
		{"delete", []entry{{name: "a\x7fb", body: "x"}}, "U+007F"},
		{"C1 next line", []entry{{name: "a\u0085b", body: "x"}}, "U+0085"},
		{"C1 CSI", []entry{{name: "a\u009b31mb", body: "x"}}, "U+009B"},
		{"invalid UTF-8", []entry{{name: "caf\xe9.py", body: "x"}}, "invalid UTF-8 (byte 0xe9 at offset 3)"},
		{"right-to-left override", []entry{{name: "evil\u202eyp.txt", body: "x"}}, "U+202E"},
		{"isolate", []entry{{name: "a\u2066b", body: "x"}}, "U+2066"},
		{"directory", []entry{{name: "d\x1b/", typ: tar.TypeDir}}, "U+001B"},
		{"symlink target", []entry{{name: "f", body: "x"}, {name: "l", link: "f\x1b[0m", typ: tar.TypeSymlink}}, "link target of \"l\""},
		{"hard link target", []entry{{name: "f", body: "x"}, {name: "h", link: "f\n", typ: tar.TypeLink}}, "U+000A"},
		{"unicode names", []entry{{name: "café/naïve_日本.py", body: "x"}, {name: "l", link: "café/naïve_日本.py", typ: tar.TypeSymlink}}, ""},
		{"a written replacement character", []entry{{name: "a\ufffdb", body: "x"}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			dst := filepath.Join(parent, "app")
			err := UnpackReader(bytes.NewReader(archive(t, tc.entries...)), dst, DefaultLimits)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want ErrUnsafe saying %q", err, tc.want)
			}
			if msg := err.Error(); !utf8.ValidString(msg) || CheckName("error", strings.ReplaceAll(msg, "…", "")) != nil {
				t.Fatalf("the error carries the raw bytes: %q", msg)
			}
			assertOnlyApp(t, parent)
			assertNamesClean(t, dst)
		})
	}
}

// assertNamesClean checks that no name and no link target in dst fails
// CheckName: nothing unpacked carries what the unpacker refuses.
func assertNamesClean(t testing.TB, dst string) {
	t.Helper()
	_ = filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if err := CheckName("unpacked", d.Name()); err != nil {
			t.Fatalf("unpacked: %v", err)
		}
		if d.Type()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			if err := CheckName("unpacked link", target); err != nil {
				t.Fatalf("%v", err)
			}
		}
		return nil
	})
}

// gzipWhole reports whether raw is a gzip stream that reads to its end
// with matching trailers.
func gzipWhole(raw []byte) bool {
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return false
	}
	_, err = io.Copy(io.Discard, zr)
	return err == nil
}

func TestQuoteName(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain", `"plain"`},
		{"a\x1bb", `"a\x1bb"`},
		{"a\xffb", `"a\xffb"`},
		{"a\u202eb", `"a\u202eb"`},
		{strings.Repeat("x", 130), `"` + strings.Repeat("x", 120) + `"…`},
	}
	for _, tc := range cases {
		if got := QuoteName(tc.in); got != tc.want {
			t.Errorf("QuoteName(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
