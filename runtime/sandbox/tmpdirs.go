package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
)

// SharedTempDirs are the host's world-writable directories: every user
// may create files there, and the files outlive their processes. In a
// mount namespace (ModeNamespaces, ModeUserNamespaces) each is a fresh
// tmpfs of the job's own, gone when its last process exits: nothing a
// deployment writes there reaches the host, another deployment, or the
// deployment's own next process tree (an install command's /tmp is not
// its agent's; files meant to last go in HOME or TMPDIR, which are in the
// deployment's directory). Without one (ModeUID, ModeLandlock), Landlock
// denies writing to all of them but /dev/shm, which POSIX semaphores and
// shared memory need (Python's multiprocessing among others); what a
// deployment's uid leaves there is removed with the deployment (see
// PurgeOwned), and the uid is not handed out again while it owns a file
// there.
var SharedTempDirs = []string{"/tmp", "/var/tmp", "/run/lock", "/dev/shm"}

// tempDirsMissing is what the isolation report says of the shared
// temporary directories in modes without a mount namespace (ll: Landlock
// is enforced).
func tempDirsMissing(m Mode, ll bool) string {
	switch {
	case m.namespaces() || m == ModeNone:
		return ""
	case ll && m == ModeUID:
		return "no mount namespace: /tmp, /var/tmp and /run/lock are the host's, and Landlock denies writing them (TMPDIR is in the deployment's directory); the host's /dev/shm stays writable: what the deployment's uid leaves there is removed with the deployment, and the uid is not given to another deployment while it owns a file there"
	case m == ModeUID:
		return "no mount namespace and no Landlock: the deployment can write the host's /tmp, /var/tmp, /run/lock and /dev/shm; what its uid leaves there is removed with the deployment, and the uid is not given to another deployment while it owns a file there"
	case ll:
		return "no mount namespace: Landlock denies writing the host's /tmp, /var/tmp and /run/lock, but /dev/shm is the host's and shared with Slipway and every deployment (all one uid)"
	}
	return "no mount namespace and no Landlock: the host's /tmp, /var/tmp, /run/lock and /dev/shm are shared with Slipway and every deployment"
}

// privateTempDirs are what hideDataDir covers with a tmpfs.
func privateTempDirs() []string { return slices.Clone(SharedTempDirs) }

// privateTempRules let a job write its private temporary directories
// (Landlock with namespaces), but not one that holds the data directory
// (then TMPDIR serves).
func privateTempRules(job Job) []landlock.Rule {
	if !job.Mode.namespaces() {
		return nil
	}
	var rules []landlock.Rule
	for _, dir := range privateTempDirs() {
		if within(job.DataDir, dir) {
			continue
		}
		rules = append(rules, landlock.RWDirs(dir).WithRefer().IgnoreIfMissing())
	}
	return rules
}

// PurgeOwned removes from each directory the entries directly in it that
// uid owns, with everything below them: what a removed deployment left in
// the host's shared temporary directories. It runs as root among files
// other uids control, so every removal goes through an os.Root of the
// directory (no component is followed as a symlink, nothing outside is
// reached); an entry of uid's inside another owner's directory is not
// removed, and keeps the uid in quarantine (OwnsFiles).
func PurgeOwned(dirs []string, uid int) error {
	var errs []error
	for _, dir := range dirs {
		root, err := os.OpenRoot(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("purge %s: %w", dir, err))
			continue
		}
		f, err := root.Open(".")
		if err != nil {
			root.Close()
			errs = append(errs, fmt.Errorf("purge %s: %w", dir, err))
			continue
		}
		names, err := f.Readdirnames(-1)
		f.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("purge %s: %w", dir, err))
		}
		for _, name := range names {
			st, err := root.Lstat(name)
			if err != nil || ownerOf(st) != uid {
				continue
			}
			if err := root.RemoveAll(name); err != nil {
				errs = append(errs, fmt.Errorf("purge %s: %w", dir, err))
			}
		}
		root.Close()
	}
	return errors.Join(errs...)
}

// OwnsFiles reports whether uid owns a file anywhere below dirs (walked
// without following links) or a running process: a uid that does must not
// be handed to another deployment.
func OwnsFiles(dirs []string, uid int) (bool, error) {
	found := errors.New("found")
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				// A directory vanishing or unreadable mid-walk: what cannot
				// be seen here cannot be checked, but root reads everything
				// that exists.
				if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
					return nil
				}
				return err
			}
			info, err := d.Info()
			if err != nil {
				return nil
			}
			if ownerOf(info) == uid {
				return found
			}
			return nil
		})
		if errors.Is(err, found) {
			return true, nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("look for files of uid %d in %s: %w", uid, dir, err)
		}
	}
	return runsProcess(uid)
}

// runsProcess reports whether a process of uid (real, effective, saved or
// filesystem) is alive on the host. /proc/<pid>/status, not the
// directory's owner: a process that made itself non-dumpable shows root's.
func runsProcess(uid int) (bool, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false, fmt.Errorf("list processes: %w", err)
	}
	want := strconv.Itoa(uid)
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue // exited meanwhile
		}
		for _, line := range strings.Split(string(raw), "\n") {
			if ids, ok := strings.CutPrefix(line, "Uid:"); ok && slices.Contains(strings.Fields(ids), want) {
				return true, nil
			}
		}
	}
	return false, nil
}

func ownerOf(info fs.FileInfo) int {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}
