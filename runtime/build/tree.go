package build

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Tree is a directory of a deployment's files (a revision's unpacked
// source, or a virtual environment) that Slipway reads or hands over on the
// deployment's behalf. Slipway runs as root or as the user whose files
// these are not, and deployment code may be running while it does (the
// serving revision, or the revision's own build steps), so no access may
// resolve a path the deployment could have redirected:
//
//   - the tree's directory is opened once, and every later access is
//     relative to that descriptor: renaming or replacing the directory or
//     anything above it changes nothing;
//   - every path below it is resolved with openat2(2) and
//     RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS (or, on a
//     kernel without openat2, one O_NOFOLLOW component at a time, which
//     refuses the same paths): a symbolic link anywhere on the way, or at
//     the end, fails the access instead of being followed, so nothing
//     outside the tree is ever opened, listed, read or changed;
//   - errors name files relative to the tree (*PathError) and say what is
//     wrong, never the tree's absolute path nor anything read from a file.
//
// Project files are regular files and directories of the source; a
// project that reaches one of them through a link (allowed in the archive,
// as long as it stays inside) is refused with a message that says so.
type Tree struct {
	fd int // the tree's directory, O_RDONLY|O_DIRECTORY
}

// OpenTree opens the directory dir (which must not be a symbolic link).
func OpenTree(dir string) (*Tree, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &PathError{Name: ".", Err: err}
	}
	return &Tree{fd: fd}, nil
}

// Close releases the tree's directory.
func (t *Tree) Close() error {
	if t == nil || t.fd < 0 {
		return nil
	}
	err := unix.Close(t.fd)
	t.fd = -1
	return err
}

// PathError is an error about a file of a tree, named relative to it
// (slash-separated). Its message is fit for the build log and the API: it
// holds neither Slipway's paths nor the file's contents.
type PathError struct {
	Name string // relative to the tree; "." for the tree itself
	Err  error  // a syscall.Errno, or one of the errors below
}

var (
	errNotRegular = errors.New("not a regular file")
	errNotDir     = errors.New("not a directory")
	errTooLarge   = errors.New("too large")
	errBadName    = errors.New("not a path inside the source")
)

func (e *PathError) Error() string {
	name := e.Name
	switch {
	case name == ".":
		name = "the source directory"
	case errors.Is(e.Err, errBadName):
		// Not echoed: it may be any path at all.
		return "a path that is not inside the source"
	}
	switch {
	case errors.Is(e.Err, unix.ENOENT):
		return name + " is not in the source"
	case errors.Is(e.Err, unix.ELOOP):
		return name + " is a symbolic link or lies under one: Slipway reads a project's files only as regular files and directories of the source, never through a link"
	case errors.Is(e.Err, unix.EXDEV):
		return name + " is not a path inside the source"
	case errors.Is(e.Err, unix.ENOTDIR):
		return name + ": a directory on its path is not a directory"
	case errors.Is(e.Err, unix.EACCES), errors.Is(e.Err, unix.EPERM):
		return name + " cannot be read (permission denied)"
	case errors.Is(e.Err, errNotRegular), errors.Is(e.Err, errNotDir):
		return name + " is " + e.Err.Error()
	case errors.Is(e.Err, errTooLarge):
		return name + " is " + e.Err.Error()
	}
	// An errno's text names no path.
	return name + ": " + e.Err.Error()
}

func (e *PathError) Unwrap() error { return e.Err }

// cleanRel checks a slash-separated path relative to the tree: "." or a
// clean path of names, none of them "..".
func cleanRel(rel string) (string, error) {
	if rel == "" || strings.ContainsRune(rel, 0) || path.IsAbs(rel) {
		return "", errBadName
	}
	c := path.Clean(rel)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", errBadName
	}
	return c, nil
}

const resolveStrict = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// noOpenat2 is set once the kernel answered openat2 with ENOSYS (before
// Linux 5.6, or a seccomp filter that does not know it): from then on
// paths are walked one component at a time.
var noOpenat2 atomic.Bool

// open opens rel beneath the tree with flags, following no link.
func (t *Tree) open(rel string, flags int) (int, error) {
	name, err := cleanRel(rel)
	if err != nil {
		return -1, err
	}
	flags |= unix.O_CLOEXEC | unix.O_NOFOLLOW
	if !noOpenat2.Load() {
		for {
			fd, err := unix.Openat2(t.fd, name, &unix.OpenHow{Flags: uint64(flags), Resolve: resolveStrict})
			if err == unix.EINTR || err == unix.EAGAIN {
				continue
			}
			if err != unix.ENOSYS {
				return fd, err
			}
			noOpenat2.Store(true)
			break
		}
	}
	return t.walkOpen(name, flags)
}

// walkOpen is open without openat2: each directory on the way is opened
// with O_NOFOLLOW from the one before and must be a directory, not a link.
func (t *Tree) walkOpen(name string, flags int) (int, error) {
	if name == "." {
		return unix.Openat(t.fd, ".", flags, 0)
	}
	parts := strings.Split(name, "/")
	dir := t.fd
	defer func() {
		if dir != t.fd {
			unix.Close(dir)
		}
	}()
	for _, p := range parts[:len(parts)-1] {
		fd, err := unix.Openat(dir, p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, err
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
		case unix.S_IFLNK:
			unix.Close(fd)
			return -1, unix.ELOOP
		default:
			unix.Close(fd)
			return -1, unix.ENOTDIR
		}
		if dir != t.fd {
			unix.Close(dir)
		}
		dir = fd
	}
	return unix.Openat(dir, parts[len(parts)-1], flags, 0)
}

// Lstat describes rel itself (a link is described, not followed).
func (t *Tree) Lstat(rel string) (fs.FileInfo, error) {
	fd, err := t.open(rel, unix.O_PATH)
	if err != nil {
		return nil, &PathError{Name: rel, Err: err}
	}
	f := os.NewFile(uintptr(fd), path.Base(rel))
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, &PathError{Name: rel, Err: unwrapPath(err)}
	}
	return st, nil
}

// IsRegular reports whether rel is a regular file (not a link to one).
func (t *Tree) IsRegular(rel string) bool {
	st, err := t.Lstat(rel)
	return err == nil && st.Mode().IsRegular()
}

// IsDir reports whether rel is a directory (not a link to one).
func (t *Tree) IsDir(rel string) bool {
	st, err := t.Lstat(rel)
	return err == nil && st.IsDir()
}

// Exists reports whether there is anything at rel, without following it.
func (t *Tree) Exists(rel string) bool {
	_, err := t.Lstat(rel)
	return err == nil
}

// Open opens the regular file rel for reading. O_NONBLOCK: a FIFO the
// deployment made does not hang the build; it is refused as not regular.
func (t *Tree) Open(rel string) (*os.File, error) {
	fd, err := t.open(rel, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, &PathError{Name: rel, Err: err}
	}
	f := os.NewFile(uintptr(fd), path.Base(rel))
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, &PathError{Name: rel, Err: unwrapPath(err)}
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, &PathError{Name: rel, Err: errNotRegular}
	}
	return f, nil
}

// ReadFile reads the regular file rel, of at most max bytes (0: no bound).
func (t *Tree) ReadFile(rel string, max int64) ([]byte, error) {
	f, err := t.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if max > 0 {
		if st, err := f.Stat(); err == nil && st.Size() > max {
			return nil, &PathError{Name: rel, Err: fmt.Errorf("%w: larger than %d bytes", errTooLarge, max)}
		}
		r = io.LimitReader(f, max+1)
	}
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, &PathError{Name: rel, Err: unwrapPath(err)}
	}
	if max > 0 && int64(len(raw)) > max {
		return nil, &PathError{Name: rel, Err: fmt.Errorf("%w: larger than %d bytes", errTooLarge, max)}
	}
	return raw, nil
}

// ReadDir lists the directory rel (not a link to one), sorted by name as
// os.ReadDir does. The entries' types are those of the entries
// themselves; call Lstat for more.
func (t *Tree) ReadDir(rel string) ([]fs.DirEntry, error) {
	fd, err := t.open(rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		if err == unix.ENOTDIR {
			err = errNotDir
		}
		return nil, &PathError{Name: rel, Err: err}
	}
	f := os.NewFile(uintptr(fd), path.Base(rel))
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, &PathError{Name: rel, Err: unwrapPath(err)}
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, nil
}

// Readlink is the target of the symbolic link rel.
func (t *Tree) Readlink(rel string) (string, error) {
	fd, err := t.open(rel, unix.O_PATH)
	if err != nil {
		return "", &PathError{Name: rel, Err: err}
	}
	defer unix.Close(fd)
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(fd, "", buf)
	if err != nil {
		if err == unix.ENOENT {
			err = unix.EINVAL // not a link
		}
		return "", &PathError{Name: rel, Err: err}
	}
	return string(buf[:n]), nil
}

// WalkDir calls fn for rel and everything below it, parents before their
// children, in lexical order, as fs.WalkDir does: fs.SkipDir from fn skips
// a directory. Links are reported as links and not followed.
func (t *Tree) WalkDir(rel string, fn func(rel string, d fs.DirEntry) error) error {
	st, err := t.Lstat(rel)
	if err != nil {
		return err
	}
	err = t.walk(rel, fs.FileInfoToDirEntry(st), fn)
	if err == fs.SkipDir || err == fs.SkipAll {
		return nil
	}
	return err
}

func (t *Tree) walk(rel string, d fs.DirEntry, fn func(string, fs.DirEntry) error) error {
	if err := fn(rel, d); err != nil || !d.IsDir() {
		if err == fs.SkipDir && d.IsDir() {
			return nil
		}
		return err
	}
	entries, err := t.ReadDir(rel)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := t.walk(pathJoin(rel, e.Name()), e, fn); err != nil {
			if err == fs.SkipDir {
				continue
			}
			return err
		}
	}
	return nil
}

// Chown gives everything in the tree, and the tree's directory itself, to
// uid and gid. It works from descriptors down: each directory is opened
// (O_NOFOLLOW) from its parent's descriptor and its entries are changed
// relative to it without following links, so no rename or link the
// deployment makes while it runs can lead the change anywhere else.
// Children are changed before their directory.
func (t *Tree) Chown(uid, gid int) error {
	if err := chownBelow(t.fd, ".", uid, gid); err != nil {
		return err
	}
	if err := unix.Fchownat(t.fd, "", uid, gid, unix.AT_EMPTY_PATH); err != nil {
		return &PathError{Name: ".", Err: err}
	}
	return nil
}

// Owner is the uid owning the tree's directory.
func (t *Tree) Owner() (int, error) {
	var st unix.Stat_t
	if err := unix.Fstat(t.fd, &st); err != nil {
		return -1, &PathError{Name: ".", Err: err}
	}
	return int(st.Uid), nil
}

func chownBelow(dirfd int, rel string, uid, gid int) error {
	dup, err := unix.FcntlInt(uintptr(dirfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return &PathError{Name: rel, Err: err}
	}
	// The duplicate shares the offset: rewind, a directory read twice
	// must be read from its start.
	if _, err := unix.Seek(dup, 0, io.SeekStart); err != nil {
		unix.Close(dup)
		return &PathError{Name: rel, Err: err}
	}
	f := os.NewFile(uintptr(dup), path.Base(rel))
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return &PathError{Name: rel, Err: unwrapPath(err)}
	}
	for _, e := range entries {
		name := e.Name()
		child := pathJoin(rel, name)
		if !e.IsDir() {
			if err := unix.Fchownat(dirfd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return &PathError{Name: child, Err: err}
			}
			continue
		}
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return &PathError{Name: child, Err: err}
		}
		err = chownBelow(fd, child, uid, gid)
		if err == nil {
			if cerr := unix.Fchownat(fd, "", uid, gid, unix.AT_EMPTY_PATH); cerr != nil {
				err = &PathError{Name: child, Err: cerr}
			}
		}
		unix.Close(fd)
		if err != nil {
			return err
		}
	}
	return nil
}

// unwrapPath is the errno of an *fs.PathError (whose path would be
// Slipway's), or err.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// PlainError is err without the path of an *fs.PathError or *os.LinkError
// (an absolute path of Slipway's, as the os package writes them): what
// failed is said by the caller, in the project's own terms.
func PlainError(err error) error {
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Err
	}
	return unwrapPath(err)
}
