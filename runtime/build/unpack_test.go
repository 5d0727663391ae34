package build

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

type entry struct {
	name, link string
	typ        byte
	body       string
}

func archive(t testing.TB, entries ...entry) []byte {
	t.Helper()
	b, err := tryArchive(entries...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func tryArchive(entries ...entry) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		hdr := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: typ, Mode: 0o644, Size: int64(len(e.body))}
		if typ != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if typ == tar.TypeReg {
			_, _ = tw.Write([]byte(e.body))
		}
	}
	_ = tw.Close()
	_ = zw.Close()
	return buf.Bytes(), nil
}

func TestUnpack(t *testing.T) {
	cases := []struct {
		name    string
		entries []entry
		lim     Limits
		unsafe  bool
		check   func(t *testing.T, dst string)
	}{
		{name: "plain tree", entries: []entry{{name: "langgraph.json", body: "{}"}, {name: "src/", typ: tar.TypeDir}, {name: "src/agent.go", body: "package main"}},
			check: func(t *testing.T, dst string) {
				if b, err := os.ReadFile(filepath.Join(dst, "src/agent.go")); err != nil || string(b) != "package main" {
					t.Fatalf("%q %v", b, err)
				}
			}},
		{name: "leading ./", entries: []entry{{name: "./a/b.txt", body: "x"}}},
		{name: "dot dot", entries: []entry{{name: "../evil.txt", body: "x"}}, unsafe: true},
		{name: "nested dot dot", entries: []entry{{name: "a/../../evil.txt", body: "x"}}, unsafe: true},
		{name: "absolute", entries: []entry{{name: "/tmp/evil.txt", body: "x"}}, unsafe: true},
		{name: "symlink out absolute", entries: []entry{{name: "l", link: "/etc", typ: tar.TypeSymlink}}, unsafe: true},
		{name: "symlink out relative", entries: []entry{{name: "a/l", link: "../../x", typ: tar.TypeSymlink}}, unsafe: true},
		{name: "symlink inside", entries: []entry{{name: "a/f", body: "x"}, {name: "l", link: "a/f", typ: tar.TypeSymlink}}},
		{name: "write through symlinked dir", entries: []entry{{name: "d", link: ".", typ: tar.TypeSymlink}, {name: "d/f", body: "x"}}},
		{name: "hard link out", entries: []entry{{name: "h", link: "../outside", typ: tar.TypeLink}}, unsafe: true},
		{name: "hard link inside", entries: []entry{{name: "f", body: "x"}, {name: "h", link: "f", typ: tar.TypeLink}}},
		{name: "char device", entries: []entry{{name: "dev", typ: tar.TypeChar}}, unsafe: true},
		{name: "fifo", entries: []entry{{name: "p", typ: tar.TypeFifo}}, unsafe: true},
		{name: "duplicate file", entries: []entry{{name: "f", body: "x"}, {name: "f", body: "y"}}, unsafe: true},
		{name: "too many files", entries: []entry{{name: "a", body: "x"}, {name: "b", body: "x"}, {name: "c", body: "x"}}, lim: Limits{MaxFiles: 2, MaxBytes: 100}, unsafe: true},
		{name: "too many bytes", entries: []entry{{name: "a", body: "0123456789"}}, lim: Limits{MaxFiles: 10, MaxBytes: 5}, unsafe: true},
		{name: "backslash", entries: []entry{{name: `..\evil`, body: "x"}}, unsafe: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			dst := filepath.Join(parent, "app")
			lim := tc.lim
			if lim.MaxFiles == 0 {
				lim = DefaultLimits
			}
			err := UnpackReader(bytes.NewReader(archive(t, tc.entries...)), dst, lim)
			if tc.unsafe != (err != nil) {
				t.Fatalf("err = %v, want unsafe %v", err, tc.unsafe)
			}
			if tc.unsafe && !errors.Is(err, ErrUnsafe) {
				t.Fatalf("err %v is not ErrUnsafe", err)
			}
			assertOnlyApp(t, parent)
			if tc.check != nil && err == nil {
				tc.check(t, dst)
			}
		})
	}
	if err := UnpackReader(bytes.NewReader([]byte("not gzip")), filepath.Join(t.TempDir(), "x"), DefaultLimits); !errors.Is(err, ErrUnsafe) {
		t.Fatalf("garbage: %v", err)
	}
}

// assertOnlyApp checks that nothing but the app directory exists beside it.
func assertOnlyApp(t testing.TB, parent string) {
	t.Helper()
	ents, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != "app" {
			t.Fatalf("unpack wrote %s outside its directory", e.Name())
		}
	}
}

// FuzzUnpack feeds arbitrary archives (and arbitrary entry names and link
// targets) to the unpacker: it must never panic nor write outside dst.
func FuzzUnpack(f *testing.F) {
	f.Add([]byte{}, "a", "b", byte(tar.TypeReg))
	f.Add(archive(f, entry{name: "x", body: "y"}), "../z", "", byte(tar.TypeReg))
	f.Add([]byte{}, "l", "../../etc", byte(tar.TypeSymlink))
	f.Add([]byte{}, "d/f", "d", byte(tar.TypeLink))
	f.Fuzz(func(t *testing.T, raw []byte, name, link string, typ byte) {
		parent := t.TempDir()
		dst := filepath.Join(parent, "app")
		_ = UnpackReader(bytes.NewReader(raw), dst, Limits{MaxFiles: 50, MaxBytes: 1 << 16})
		_ = os.RemoveAll(dst)
		assertOnlyApp(t, parent)

		parent2 := t.TempDir()
		dst2 := filepath.Join(parent2, "app")
		switch typ % 4 {
		case 0:
			typ = tar.TypeReg
		case 1:
			typ = tar.TypeSymlink
		case 2:
			typ = tar.TypeLink
		default:
			typ = tar.TypeDir
		}
		a, err := tryArchive(entry{name: name, link: link, typ: typ}, entry{name: name + "/f", body: "x"}, entry{name: "z", body: "y"})
		if err != nil {
			return // not encodable as tar: nothing to unpack
		}
		_ = UnpackReader(bytes.NewReader(a), dst2, DefaultLimits)
		assertOnlyApp(t, parent2)
	})
}
