// Package build turns an uploaded source archive into an application
// directory, for either driver: it unpacks safely and reads the graph
// configuration.
package build

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Limits bound what an archive may unpack to.
type Limits struct {
	MaxFiles int   // regular files, directories and links
	MaxBytes int64 // total size of regular files
}

// DefaultLimits suit agent source trees.
var DefaultLimits = Limits{MaxFiles: 20000, MaxBytes: 1 << 30}

// ErrUnsafe marks an archive refused for its content; the message says why.
var ErrUnsafe = errors.New("unsafe archive")

// Unpack extracts the gzip'd tar at src into dst (which must not exist yet
// or be empty). It refuses entries that would escape dst (absolute paths,
// `..`), entries whose path goes through a symbolic link extracted before,
// symbolic links that lead out of dst once every link is followed, hard
// links to anything but a regular file, device files, FIFOs, and archives
// over the limits. Nothing is ever written outside dst, and no link left in
// dst leads out of it; on error dst may hold a partial tree the caller
// removes.
func Unpack(src, dst string, lim Limits) error {
	f, err := os.Open(src)
	if err != nil {
		// src is Slipway's upload, under its data directory: not named.
		return fmt.Errorf("open the source archive: %w", PlainError(err))
	}
	defer f.Close()
	return UnpackReader(f, dst, lim)
}

// UnpackReader is Unpack over a stream.
func UnpackReader(r io.Reader, dst string, lim Limits) (err error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("%w: not gzip-compressed: %v", ErrUnsafe, err)
	}
	// dst is Slipway's path: errors say what failed without it.
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("create the source directory: %w", PlainError(err))
	}
	// os.Root confines every write to dst, whatever links are in the way;
	// what it cannot do is keep a link it creates from pointing out, which
	// is what the link bookkeeping below is for.
	root, err := os.OpenRoot(dst)
	if err != nil {
		return fmt.Errorf("open the source directory: %w", PlainError(err))
	}
	defer root.Close()
	u := &unpacker{root: root, links: map[string]string{}}
	// A link can be made to lead out by one extracted after it (`t -> s/x`,
	// then `s -> ..`), so every link is checked again against the final
	// tree, on error too: a partial tree must not hold one either.
	defer func() { err = errors.Join(err, u.checkLinks()) }()
	tr := tar.NewReader(zr)
	var files int
	var total int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return FinishArchive(zr)
		}
		if err != nil {
			return tarError(err)
		}
		if err := CheckHeader(hdr); err != nil {
			return err
		}
		name, err := clean(hdr.Name)
		if err != nil {
			return err
		}
		if name == "" {
			continue // the archive root itself
		}
		if files++; files > lim.MaxFiles {
			return fmt.Errorf("%w: more than %d entries", ErrUnsafe, lim.MaxFiles)
		}
		// A tar of a real tree never has an entry below a symbolic link;
		// one that does would be written wherever the link leads.
		if err := u.notThroughLink(name, name); err != nil {
			return err
		}
		mode := os.FileMode(hdr.Mode).Perm() &^ 0o022 // never world/group-writable
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, mode|0o700); err != nil {
				return fmt.Errorf("create %s: %w", name, PlainError(err))
			}
		case tar.TypeReg:
			if total += hdr.Size; total > lim.MaxBytes {
				return fmt.Errorf("%w: more than %d bytes of files", ErrUnsafe, lim.MaxBytes)
			}
			if err := mkParent(root, name); err != nil {
				return err
			}
			out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode|0o600)
			if err != nil {
				return fmt.Errorf("%w: create %s: %v", ErrUnsafe, name, PlainError(err))
			}
			_, cerr := io.Copy(out, io.LimitReader(tr, hdr.Size))
			if err := errors.Join(PlainError(cerr), PlainError(out.Close())); err != nil {
				if isStreamError(cerr) {
					return streamError(cerr)
				}
				return fmt.Errorf("write %s: %w", name, err)
			}
		case tar.TypeSymlink:
			if err := u.checkLink(name, hdr.Linkname); err != nil {
				return err
			}
			if err := mkParent(root, name); err != nil {
				return err
			}
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return fmt.Errorf("%w: link %s: %v", ErrUnsafe, name, PlainError(err))
			}
			u.links[name] = hdr.Linkname
		case tar.TypeLink:
			target, err := clean(hdr.Linkname)
			if err != nil || target == "" {
				return fmt.Errorf("%w: hard link %s points outside the archive", ErrUnsafe, name)
			}
			if err := u.notThroughLink(name, target); err != nil {
				return err
			}
			// A hard link to a symbolic link is a second symbolic link,
			// whose relative target means something else in its new
			// directory: only regular files may be linked.
			if fi, err := root.Lstat(target); err != nil || !fi.Mode().IsRegular() {
				return fmt.Errorf("%w: hard link %s must point to a regular file extracted before it, not %q", ErrUnsafe, name, hdr.Linkname)
			}
			if err := mkParent(root, name); err != nil {
				return err
			}
			if err := root.Link(target, name); err != nil {
				return fmt.Errorf("%w: hard link %s: %v", ErrUnsafe, name, PlainError(err))
			}
		case tar.TypeXGlobalHeader, tar.TypeXHeader:
		default:
			return fmt.Errorf("%w: %s is a device, FIFO or other special file (type %q)", ErrUnsafe, name, hdr.Typeflag)
		}
	}
}

// tarError says what a read error of the archive means: the gzip stream's
// own (truncated, corrupt), or the tar's.
func tarError(err error) error {
	if isStreamError(err) {
		return streamError(err)
	}
	return fmt.Errorf("%w: corrupt tar: %v", ErrUnsafe, err)
}

// isStreamError reports the read errors of a gzip stream cut short or
// corrupt (a file's write errors are never these).
func isStreamError(err error) bool {
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader)
}

// maxHops bounds the links followed to resolve one target, as the kernel
// does (ELOOP): a longer chain is refused rather than guessed at.
const maxHops = 40

// unpacker remembers the symbolic links it has extracted, so that link
// targets are resolved the way the kernel will resolve them, through the
// other links, and not by their text alone.
type unpacker struct {
	root  *os.Root
	links map[string]string // clean name → target, as extracted
}

// notThroughLink refuses p (the entry name, or a hard link's target) when
// it is, or goes through, a symbolic link already extracted.
func (u *unpacker) notThroughLink(entry, p string) error {
	for i := 0; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		if _, ok := u.links[p[:i]]; ok {
			return fmt.Errorf("%w: %s goes through the symlink %s, extracted before it", ErrUnsafe, entry, p[:i])
		}
	}
	return nil
}

// checkLink refuses a symlink whose target, resolved from the link's own
// directory through the links extracted so far, leaves the archive root.
func (u *unpacker) checkLink(name, target string) error {
	if target == "" || path.IsAbs(target) {
		return fmt.Errorf("%w: symlink %s points to %q, outside the archive", ErrUnsafe, name, target)
	}
	if strings.ContainsRune(target, 0) || strings.Contains(target, `\`) {
		return fmt.Errorf("%w: symlink %s points to %q", ErrUnsafe, name, target)
	}
	hops := 0
	if _, ok := u.resolve(dirOf(name), target, &hops); !ok {
		if hops > maxHops {
			return fmt.Errorf("%w: symlink %s points to %q, through more than %d links", ErrUnsafe, name, target, maxHops)
		}
		return fmt.Errorf("%w: symlink %s points to %q, outside the archive", ErrUnsafe, name, target)
	}
	return nil
}

// checkLinks checks every extracted link against the final tree and
// removes those that lead out, so none is left for the caller to follow.
func (u *unpacker) checkLinks() error {
	names := slices.Sorted(maps.Keys(u.links))
	var errs []error
	for _, name := range names {
		if err := u.checkLink(name, u.links[name]); err != nil {
			errs = append(errs, err)
			if rerr := u.root.Remove(name); rerr != nil {
				errs = append(errs, fmt.Errorf("remove %s: %w", name, PlainError(rerr)))
			}
		}
	}
	return errors.Join(errs...)
}

// resolve follows target from the directory whose path components are dir,
// through the extracted links, and returns the components it ends at; ok is
// false when it climbs above the root or follows more than maxHops links.
func (u *unpacker) resolve(dir []string, target string, hops *int) (_ []string, ok bool) {
	cur := append([]string(nil), dir...)
	for _, c := range strings.Split(target, "/") {
		switch c {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return nil, false
			}
			cur = cur[:len(cur)-1]
			continue
		}
		cur = append(cur, c)
		t, isLink := u.links[strings.Join(cur, "/")]
		if !isLink {
			continue
		}
		if *hops++; *hops > maxHops || path.IsAbs(t) {
			return nil, false
		}
		if cur, ok = u.resolve(cur[:len(cur)-1], t, hops); !ok {
			return nil, false
		}
	}
	return cur, true
}

// dirOf returns the components of name's directory.
func dirOf(name string) []string {
	d := path.Dir(name)
	if d == "." {
		return nil
	}
	return strings.Split(d, "/")
}

// clean validates an entry name and returns it relative and slash-clean.
func clean(name string) (string, error) {
	if strings.ContainsRune(name, 0) || strings.Contains(name, `\`) {
		return "", fmt.Errorf("%w: entry name %q", ErrUnsafe, name)
	}
	if path.IsAbs(name) {
		return "", fmt.Errorf("%w: absolute path %q", ErrUnsafe, name)
	}
	c := path.Clean(name)
	if c == "." {
		return "", nil
	}
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%w: path %q escapes the archive", ErrUnsafe, name)
	}
	return c, nil
}

func mkParent(root *os.Root, name string) error {
	if dir := path.Dir(name); dir != "." {
		if err := root.MkdirAll(filepath.FromSlash(dir), 0o755); err != nil {
			return fmt.Errorf("%w: create %s: %v", ErrUnsafe, dir, PlainError(err))
		}
	}
	return nil
}
