package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	"golang.org/x/sys/unix"
)

// Main is the launcher: it reads the Job from SpecEnv, contains itself and
// execs the job's target. It returns only on failure (exit status 126, the
// shell's "cannot execute"), after saying why on stderr.
func Main() int {
	// Pdeathsig and no_new_privs are per thread, and exec keeps only the
	// calling thread: everything below happens on this one.
	runtime.LockOSThread()
	raw := os.Getenv(SpecEnv)
	os.Unsetenv(SpecEnv)
	var job Job
	if err := json.Unmarshal([]byte(raw), &job); err != nil {
		fmt.Fprintf(os.Stderr, "slipway sandbox: bad job: %v\n", err)
		return 126
	}
	if err := launch(job); err != nil {
		fmt.Fprintf(os.Stderr, "slipway sandbox: %v\n", err)
		return 126
	}
	return 0 // a probe
}

func launch(job Job) error {
	// Before anything is opened here, and while the launcher is still
	// root: see cgroup.go and fds.go.
	if err := checkKeptFDs(job.KeepFDs); err != nil {
		return err
	}
	if err := joinCgroups(job.Cgroups); err != nil {
		return err
	}
	if !filepath.IsAbs(job.DataDir) || !filepath.IsAbs(job.DeployDir) || !within(job.DeployDir, job.DataDir) {
		return fmt.Errorf("deployment directory %q is not inside the data directory %q", job.DeployDir, job.DataDir)
	}
	// The target may lie where the job cannot reach it (a 0700 directory,
	// or under a tmpfs mounted below): open it now and exec it by fd.
	var target *os.File
	if !job.Probe {
		path, err := lookPath(job.Argv[0], job.Env)
		if err != nil {
			return err
		}
		if target, err = os.Open(path); err != nil {
			return fmt.Errorf("open %s: %w", path, err)
		}
	}
	// What the job is to see of its deployment, opened before anything
	// hides it and kept open: the mounts and the Landlock rules below are
	// of these very directories.
	binds, openErr := openVisible(job)
	if openErr != nil {
		return openErr
	}
	defer binds.close()
	job.open = binds
	if job.Mode.namespaces() {
		if err := hideDataDir(job); err != nil {
			return err
		}
	}
	if job.Mode.landlock() {
		exe := ""
		if target != nil {
			exe = "/proc/self/fd/" + strconv.Itoa(int(target.Fd()))
		}
		if err := restrictLandlock(job, exe); err != nil {
			return err
		}
	}
	// After Landlock, which needs to open every path of its rules (some
	// only root can), and which the uid change does not undo.
	if job.Mode.Privileged() {
		if err := dropPrivileges(job.UID, job.GID); err != nil {
			return err
		}
	}
	// The ambient capability a user namespace's launcher was given must
	// not reach the job.
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	// Landlock sets no_new_privs itself; other modes need it too, so that
	// no setuid binary gives back what was dropped.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	// A credential change clears the parent-death signal: set it again so
	// that the job dies with Slipway.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("pdeathsig: %w", err)
	}
	if job.Probe {
		return nil
	}
	if err := os.Chdir(job.Dir); err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	// Nothing but stdin, stdout, stderr and the pipes the job names
	// crosses into the job.
	if err := closeExtraFDs(job.KeepFDs); err != nil {
		return err
	}
	exe := "/proc/self/fd/" + strconv.Itoa(int(target.Fd()))
	err := syscall.Exec(exe, job.Argv, scrub(job.Env))
	return fmt.Errorf("exec %s: %w", job.Argv[0], err)
}

// lookPath resolves argv[0] with the job's PATH, not the launcher's (which
// has none).
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, dir := range filepath.SplitList(p) {
				if dir == "" || !filepath.IsAbs(dir) {
					continue
				}
				cand := filepath.Join(dir, name)
				if st, err := os.Stat(cand); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
					return cand, nil
				}
			}
		}
	}
	return "", fmt.Errorf("%s: %w", name, exec.ErrNotFound)
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && rel != "." && !filepath.IsAbs(rel)
}

// hideDataDir runs in the launcher's new mount namespace: mounts stop
// propagating to the host, private tmpfs cover the shared temporary
// directories (SharedTempDirs) and the data directory, the directories of
// the deployment the job is to see are bound back at their own paths, and
// a /proc of the new PID namespace replaces the host's.
func hideDataDir(job Job) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	// Parents first, so that a data directory under /tmp is hidden by its
	// own tmpfs on top of the private /tmp.
	// Slipway may run with umask 0077 (systemd's UMask); the deployment's
	// uid must be able to walk down to its directory through every mount
	// point made here, including a data dir under the private /tmp.
	old := unix.Umask(0)
	defer unix.Umask(old)
	hide := append(privateTempDirs(), job.DataDir)
	sort.Slice(hide, func(i, j int) bool { return len(hide[i]) < len(hide[j]) })
	for _, dir := range hide {
		if _, err := os.Stat(dir); err != nil {
			if dir != job.DataDir {
				continue // no /run/lock here: nothing to hide
			}
			if err := os.MkdirAll(dir, 0o711); err != nil {
				return fmt.Errorf("mount point %s: %w", dir, err)
			}
		}
		mode := "1777"
		if dir == job.DataDir {
			mode = "0711"
		}
		if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode="+mode+",size=16m"); err != nil {
			return fmt.Errorf("tmpfs over %s: %w", dir, err)
		}
	}
	// Only the directories the job is to see come back (job.open, held
	// from before the tmpfs): not the deployment's other revisions.
	if err := job.open.mount(); err != nil {
		return err
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	return nil
}

// dropPrivileges becomes the deployment's uid and gid with no
// supplementary groups; the kernel drops every capability with the uid.
// Go applies these to all threads.
func dropPrivileges(uid, gid int) error {
	if uid <= 0 || gid <= 0 {
		return fmt.Errorf("refusing to run a deployment as uid %d gid %d", uid, gid)
	}
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setresgid(gid, gid, gid); err != nil {
		return fmt.Errorf("setresgid: %w", err)
	}
	if err := syscall.Setresuid(uid, uid, uid); err != nil {
		return fmt.Errorf("setresuid: %w", err)
	}
	if syscall.Setresuid(0, 0, 0) == nil {
		return errors.New("privileges were not dropped")
	}
	return nil
}

// restrictLandlock allows reading and executing everything but the data
// directory, and writing only in the directories of the deployment the
// job is to see (job.open) and /dev.
// Landlock is an allow-list, so "everything but" is each sibling along
// the path down to the data directory. Best effort: an older kernel
// enforces what it knows, one without Landlock nothing (Probe reports it).
//
// exe, the target opened by fd, may lie where no rule reaches it (under a
// tmpfs the namespaces mounted): it gets a rule of its own.
func restrictLandlock(job Job, exe string) error {
	var rules []landlock.Rule
	for dir := "/"; dir != job.DataDir; {
		next := nextComponent(dir, job.DataDir)
		entries, err := os.ReadDir(dir)
		if err != nil {
			break // unreadable: its other entries stay denied
		}
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			if p == next {
				continue
			}
			// Siblings may vanish between the listing and the rule (a
			// build's temporary directory): a missing one needs no rule.
			if e.IsDir() {
				rules = append(rules, landlock.RODirs(p).IgnoreIfMissing())
			} else {
				rules = append(rules, landlock.ROFiles(p).IgnoreIfMissing())
			}
		}
		dir = next
	}
	// Of the data directory, only what the job is to see (job.open).
	rules = append(rules, job.open.rules()...)
	rules = append(rules, landlock.RWDirs("/dev").WithIoctlDev().IgnoreIfMissing())
	rules = append(rules, privateTempRules(job)...)
	if exe != "" {
		rules = append(rules, landlock.ROFiles(exe))
	}
	cfg, err := landlock.NewConfig(landlock.V11.HandledAccessFS, landlock.V11.Scoped)
	if err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	// Network rights are not handled: agents listen and call out.
	if err := cfg.BestEffort().Restrict(rules...); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	return nil
}

// nextComponent is the child of dir on the way to target.
func nextComponent(dir, target string) string {
	rel, _ := filepath.Rel(dir, target)
	first, _, _ := strings.Cut(rel, string(filepath.Separator))
	return filepath.Join(dir, first)
}
