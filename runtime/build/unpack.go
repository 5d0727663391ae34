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
	"os"
	"path"
	"path/filepath"
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
// `..`), symbolic or hard links whose target leaves dst, device files,
// FIFOs, and archives over the limits. Nothing is ever written outside dst;
// on error dst may hold a partial tree the caller removes.
func Unpack(src, dst string, lim Limits) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("open archive: %w", err)
	}
	defer f.Close()
	return UnpackReader(f, dst, lim)
}

// UnpackReader is Unpack over a stream.
func UnpackReader(r io.Reader, dst string, lim Limits) error {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("%w: not gzip-compressed: %v", ErrUnsafe, err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dst, err)
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return fmt.Errorf("open %s: %w", dst, err)
	}
	defer root.Close()
	tr := tar.NewReader(zr)
	var files int
	var total int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: corrupt tar: %v", ErrUnsafe, err)
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
		mode := os.FileMode(hdr.Mode).Perm() &^ 0o022 // never world/group-writable
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, mode|0o700); err != nil {
				return fmt.Errorf("create %s: %w", name, err)
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
				return fmt.Errorf("%w: create %s: %v", ErrUnsafe, name, err)
			}
			_, cerr := io.Copy(out, io.LimitReader(tr, hdr.Size))
			if err := errors.Join(cerr, out.Close()); err != nil {
				return fmt.Errorf("write %s: %w", name, err)
			}
		case tar.TypeSymlink:
			if err := checkLink(name, hdr.Linkname); err != nil {
				return err
			}
			if err := mkParent(root, name); err != nil {
				return err
			}
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return fmt.Errorf("%w: link %s: %v", ErrUnsafe, name, err)
			}
		case tar.TypeLink:
			target, err := clean(hdr.Linkname)
			if err != nil || target == "" {
				return fmt.Errorf("%w: hard link %s points outside the archive", ErrUnsafe, name)
			}
			if err := mkParent(root, name); err != nil {
				return err
			}
			if err := root.Link(target, name); err != nil {
				return fmt.Errorf("%w: hard link %s: %v", ErrUnsafe, name, err)
			}
		case tar.TypeXGlobalHeader, tar.TypeXHeader:
		default:
			return fmt.Errorf("%w: %s is a device, FIFO or other special file (type %q)", ErrUnsafe, name, hdr.Typeflag)
		}
	}
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

// checkLink refuses a symlink whose target, resolved from the link's own
// directory, leaves the archive root.
func checkLink(name, target string) error {
	if target == "" || path.IsAbs(target) {
		return fmt.Errorf("%w: symlink %s points to %q, outside the archive", ErrUnsafe, name, target)
	}
	resolved := path.Clean(path.Join(path.Dir(name), target))
	if resolved == ".." || strings.HasPrefix(resolved, "../") {
		return fmt.Errorf("%w: symlink %s points to %q, outside the archive", ErrUnsafe, name, target)
	}
	return nil
}

func mkParent(root *os.Root, name string) error {
	if dir := path.Dir(name); dir != "." {
		if err := root.MkdirAll(filepath.FromSlash(dir), 0o755); err != nil {
			return fmt.Errorf("%w: create %s: %v", ErrUnsafe, dir, err)
		}
	}
	return nil
}
