package build

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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
		{name: "write through symlinked dir", entries: []entry{{name: "d", link: ".", typ: tar.TypeSymlink}, {name: "d/f", body: "x"}}, unsafe: true},
		{name: "dir through symlink", entries: []entry{{name: "d", link: ".", typ: tar.TypeSymlink}, {name: "d/x/", typ: tar.TypeDir}}, unsafe: true},
		{name: "entry replaces symlink", entries: []entry{{name: "d", link: "a", typ: tar.TypeSymlink}, {name: "d/", typ: tar.TypeDir}}, unsafe: true},
		// d/s/t is created in the root, where d/s leads: its ".." is the
		// root's parent, though "d/s/.." reads as "d".
		{name: "symlink through symlink", entries: []entry{{name: "d/", typ: tar.TypeDir},
			{name: "d/s", link: "..", typ: tar.TypeSymlink}, {name: "d/s/t", link: "..", typ: tar.TypeSymlink}}, unsafe: true},
		{name: "target through symlink", entries: []entry{{name: "s", link: ".", typ: tar.TypeSymlink},
			{name: "t", link: "s/..", typ: tar.TypeSymlink}}, unsafe: true},
		// t is harmless until s appears and makes "s/.." the root's parent.
		{name: "later symlink redirects earlier", entries: []entry{{name: "t", link: "s/..", typ: tar.TypeSymlink},
			{name: "s", link: ".", typ: tar.TypeSymlink}}, unsafe: true},
		{name: "redirected, then another error", entries: []entry{{name: "t", link: "s/..", typ: tar.TypeSymlink},
			{name: "s", link: ".", typ: tar.TypeSymlink}, {name: "../evil", body: "x"}}, unsafe: true},
		{name: "symlink loop", entries: []entry{{name: "a", link: "b", typ: tar.TypeSymlink}, {name: "b", link: "a", typ: tar.TypeSymlink}}, unsafe: true},
		{name: "hard link to symlink", entries: []entry{{name: "a/b/s", link: "../..", typ: tar.TypeSymlink},
			{name: "h", link: "a/b/s", typ: tar.TypeLink}}, unsafe: true},
		{name: "hard link through symlink", entries: []entry{{name: "f", body: "x"}, {name: "d", link: ".", typ: tar.TypeSymlink},
			{name: "h", link: "d/f", typ: tar.TypeLink}}, unsafe: true},
		{name: "hard link to directory", entries: []entry{{name: "a/", typ: tar.TypeDir}, {name: "h", link: "a", typ: tar.TypeLink}}, unsafe: true},
		{name: "symlink to root", entries: []entry{{name: "d/s", link: "..", typ: tar.TypeSymlink}}},
		{name: "node_modules bin link", entries: []entry{{name: "node_modules/pkg/bin/x.js", body: "x"},
			{name: "node_modules/.bin/x", link: "../pkg/bin/x.js", typ: tar.TypeSymlink}},
			check: func(t *testing.T, dst string) {
				if b, err := os.ReadFile(filepath.Join(dst, "node_modules/.bin/x")); err != nil || string(b) != "x" {
					t.Fatalf("%q %v", b, err)
				}
			}},
		{name: "symlink chain inside", entries: []entry{{name: "a/b/f", body: "x"}, {name: "l1", link: "a/b", typ: tar.TypeSymlink},
			{name: "a/l2", link: "../l1/f", typ: tar.TypeSymlink}}},
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
			assertNoEscape(t, dst) // a partial tree included
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

// assertNoEscape checks, by following them on the file system, that no
// symbolic link in dst leads out of it.
func assertNoEscape(t testing.TB, dst string) {
	t.Helper()
	root, err := filepath.Abs(dst)
	if err != nil {
		t.Fatal(err)
	}
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type()&fs.ModeSymlink != 0 && leavesRoot(root, p) {
			target, _ := os.Readlink(p)
			t.Fatalf("%s -> %s leads out of %s", p, target, root)
		}
		return nil
	})
}

// leavesRoot reports whether following the symbolic link at p, component
// by component as the kernel would, ever climbs above root. A chain of
// more than 40 links ends there (the kernel's ELOOP), inside.
func leavesRoot(root, p string) bool {
	hops := 0
	var follow func(dir, target string) (string, bool)
	follow = func(dir, target string) (string, bool) {
		if filepath.IsAbs(target) {
			return "", false
		}
		cur := dir
		for _, c := range strings.Split(target, "/") {
			switch c {
			case "", ".":
				continue
			case "..":
				if cur == root {
					return "", false
				}
				cur = filepath.Dir(cur)
				continue
			}
			cur = filepath.Join(cur, c)
			fi, err := os.Lstat(cur)
			if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
				continue
			}
			if hops++; hops > 40 {
				return cur, true
			}
			next, err := os.Readlink(cur)
			if err != nil {
				return cur, true
			}
			var ok bool
			if cur, ok = follow(filepath.Dir(cur), next); !ok {
				return "", false
			}
		}
		return cur, true
	}
	target, err := os.Readlink(p)
	if err != nil {
		return false
	}
	_, ok := follow(filepath.Dir(p), target)
	return !ok
}

// FuzzUnpack feeds arbitrary archives (and arbitrary entry names and link
// targets) to the unpacker: it must never panic, write outside dst, nor
// leave a link there that leads out, whether it succeeds or not; and when
// it succeeds, the gzip stream was whole (its trailers read and matching)
// and no name or link target unpacked holds what CheckName refuses.
func FuzzUnpack(f *testing.F) {
	// A gzip stream without its trailer, one with data after the tar's
	// end, and names with control characters and invalid UTF-8.
	whole := archive(f, entry{name: "langgraph.json", body: "{}"})
	f.Add(whole[:len(whole)-8], "", "", byte(0))
	f.Add(append(append([]byte(nil), whole...), archive(f, entry{name: "hidden", body: "x"})...), "", "", byte(0))
	f.Add(archive(f, entry{name: "a\x1b[31m.py", body: "x"}), "", "", byte(0))
	f.Add([]byte{}, "a\nb", "c\u202ed", byte(tar.TypeSymlink))
	f.Add([]byte{}, "caf\xe9", "\x7f", byte(tar.TypeLink))
	f.Add([]byte{}, "a", "b", byte(tar.TypeReg))
	f.Add(archive(f, entry{name: "x", body: "y"}), "../z", "", byte(tar.TypeReg))
	f.Add([]byte{}, "l", "../../etc", byte(tar.TypeSymlink))
	f.Add([]byte{}, "d/f", "d", byte(tar.TypeLink))
	// A link below a link: d/s -> .., then d/s/t -> .. (typ 1: symlink).
	f.Add([]byte{}, "d/s", "..", byte(1))
	f.Add(archive(f, entry{name: "d/", typ: tar.TypeDir}, entry{name: "d/s", link: "..", typ: tar.TypeSymlink},
		entry{name: "d/s/t", link: "..", typ: tar.TypeSymlink}), "", "", byte(0))
	// A link made to lead out by a later one: t -> s/.., then s -> .
	f.Add(archive(f, entry{name: "t", link: "s/..", typ: tar.TypeSymlink}, entry{name: "s", link: ".", typ: tar.TypeSymlink}),
		"", "", byte(0))
	f.Fuzz(func(t *testing.T, raw []byte, name, link string, typ byte) {
		parent := t.TempDir()
		dst := filepath.Join(parent, "app")
		err := UnpackReader(bytes.NewReader(raw), dst, Limits{MaxFiles: 50, MaxBytes: 1 << 16})
		assertOnlyApp(t, parent)
		assertNoEscape(t, dst)
		if err == nil {
			if !gzipWhole(raw) {
				t.Fatal("unpacked an archive whose gzip stream is not whole")
			}
			assertNamesClean(t, dst)
		}
		_ = os.RemoveAll(dst)

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
		a, err := tryArchive(entry{name: name, link: link, typ: typ}, entry{name: name + "/t", link: link, typ: tar.TypeSymlink},
			entry{name: name + "/f", body: "x"}, entry{name: "z", body: "y"})
		if err != nil {
			return // not encodable as tar: nothing to unpack
		}
		err = UnpackReader(bytes.NewReader(a), dst2, DefaultLimits)
		assertOnlyApp(t, parent2)
		assertNoEscape(t, dst2)
		if err == nil {
			assertNamesClean(t, dst2)
		}
	})
}
