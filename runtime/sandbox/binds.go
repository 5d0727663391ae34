package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/landlock-lsm/go-landlock/landlock"
	"golang.org/x/sys/unix"
)

// Bind is one directory of the deployment's directory that a job sees:
// its own source, its virtual environment, the deployment's HOME, TMPDIR
// and agent database. Nothing else of the deployment's directory is
// reachable: not the revision that is being built while another serves,
// not a revision that served before. Path is absolute and below
// Job.DeployDir.
type Bind struct {
	Path string `json:"path"`
	// ReadOnly: the job may read and execute, not change (another
	// revision's virtual environment whose packages a revision shares).
	ReadOnly bool `json:"read_only,omitempty"`
}

// openBind is a Bind held open by the launcher (O_PATH), so that the mount
// and the Landlock rule are of the directory that was checked, whatever
// is renamed meanwhile.
type openBind struct {
	Bind
	fd int
}

type openBinds []openBind

// visible is what the job sees of its deployment's directory: its Binds,
// or, when it names none (the start-up probe), the whole directory.
func (job Job) visible() []Bind {
	if len(job.Binds) > 0 {
		return job.Binds
	}
	return []Bind{{Path: job.DeployDir}}
}

// openVisible opens every directory the job is to see, beneath the
// deployment's directory with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS: a link
// anywhere on the way (the deployment's code may have made one, where it
// could write) fails the launch instead of binding what it leads to.
func openVisible(job Job) (openBinds, error) {
	dep, err := unix.Open(job.DeployDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open deployment directory: %w", err)
	}
	defer unix.Close(dep)
	var out openBinds
	for _, b := range job.visible() {
		rel, err := filepath.Rel(job.DeployDir, b.Path)
		if err != nil || !filepath.IsAbs(b.Path) || filepath.Clean(b.Path) != b.Path || (b.Path != job.DeployDir && !within(b.Path, job.DeployDir)) {
			out.close()
			return nil, fmt.Errorf("bind %q is not inside the deployment directory", b.Path)
		}
		fd, err := openBeneath(dep, rel)
		if err != nil {
			out.close()
			return nil, fmt.Errorf("open %s of the deployment directory: %w", rel, err)
		}
		out = append(out, openBind{Bind: b, fd: fd})
	}
	return out, nil
}

// openBeneath opens the directory rel below dir as O_PATH, following no
// link; one component at a time where the kernel has no openat2.
func openBeneath(dir int, rel string) (int, error) {
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(dir, rel, how)
	if err != unix.ENOSYS {
		return fd, err
	}
	cur, err := unix.Openat(dir, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if rel == "." {
		return cur, nil
	}
	for _, c := range strings.Split(rel, "/") {
		if c == ".." {
			unix.Close(cur)
			return -1, unix.EXDEV
		}
		next, err := unix.Openat(cur, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(cur)
		if err != nil {
			return -1, err
		}
		cur = next
	}
	return cur, nil
}

func (b openBinds) close() {
	for _, o := range b {
		unix.Close(o.fd)
	}
}

func fdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// mount binds each directory back at its own path, in the mount namespace
// where a tmpfs now covers the data directory; read-only ones are made so
// on the bind alone.
func (b openBinds) mount() error {
	for _, o := range b {
		if err := os.MkdirAll(o.Path, 0o711); err != nil {
			return fmt.Errorf("mount point %s: %w", o.Path, err)
		}
		if err := unix.Mount(fdPath(o.fd), o.Path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s: %w", o.Path, err)
		}
		if o.ReadOnly {
			if err := readOnly(o.Path); err != nil {
				return fmt.Errorf("make %s read-only: %w", o.Path, err)
			}
		}
	}
	return nil
}

// readOnly makes the bind mount at p (and those below it) read-only:
// mount_setattr where the kernel has it (5.12), else a remount that keeps
// the flags the mount has, which a user namespace may not clear.
func readOnly(p string) error {
	err := unix.MountSetattr(unix.AT_FDCWD, p, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
	if !errors.Is(err, unix.ENOSYS) {
		return err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return err
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
	for _, f := range []struct{ st, ms int64 }{
		{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if st.Flags&f.st != 0 {
			flags |= uintptr(f.ms)
		}
	}
	return unix.Mount("", p, "", flags, "")
}

// rules are the Landlock rules of the binds: read, write and execute in
// each (read and execute in a read-only one), by the descriptors opened
// above, whatever their paths lead to now.
func (b openBinds) rules() []landlock.Rule {
	var out []landlock.Rule
	for _, o := range b {
		if o.ReadOnly {
			out = append(out, landlock.RODirs(fdPath(o.fd)))
		} else {
			out = append(out, landlock.RWDirs(fdPath(o.fd)).WithRefer())
		}
	}
	return out
}
