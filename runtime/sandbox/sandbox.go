// Package sandbox contains code that comes from a deployment (its install
// and build commands, its agent server and the command graphs that agent
// runs) so that it reaches nothing of Slipway's data directory but its own
// deployment's files, cannot reach the admin socket, cannot read another
// deployment's files, environment or memory, and cannot signal or ptrace
// Slipway or another agent.
//
// Go cannot run code between fork and exec, so the restrictions are
// applied by a launcher: Slipway starts its own binary with the hidden
// subcommand [Subcommand] and a [Job] in the environment variable
// [SpecEnv]; the launcher reads and removes it, applies every restriction
// the host allows, and execs the target. runc and nsjail work the same way.
//
// What the host allows is decided once, at start-up, by [Probe], which
// tries the strongest mode and reports the one in force ([Mode]).
package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Subcommand is the argv[1] that makes the slipway binary the launcher. It
// is internal: documented nowhere but main.go.
const Subcommand = "internal-sandbox-exec"

// SpecEnv carries the JSON Job to the launcher. The target never sees it:
// it is exec'd with Job.Env alone.
const SpecEnv = "SLIPWAY_SANDBOX_SPEC"

// Mode is how deployment code is contained on this host.
type Mode string

const (
	// ModeNamespaces (Slipway is root): a uid/gid per deployment, and new
	// mount, PID and IPC namespaces in which the data directory is a
	// tmpfs holding only the directories of the deployment that the job's
	// revision needs (Job.Binds), /proc shows only the deployment's
	// processes, and /tmp, /var/tmp, /run/lock and /dev/shm are private.
	ModeNamespaces Mode = "namespaces"
	// ModeUID (Slipway is root, namespaces failed, e.g. inside an
	// unprivileged container): a uid/gid per deployment plus Landlock.
	ModeUID Mode = "uid"
	// ModeUserNamespaces (Slipway is not root): an unprivileged user
	// namespace with the same mount, PID and IPC namespaces as
	// ModeNamespaces, plus Landlock; deployments share Slipway's uid.
	ModeUserNamespaces Mode = "user-namespaces"
	// ModeLandlock (Slipway is not root, no user namespaces): Landlock
	// alone; deployments share Slipway's uid.
	ModeLandlock Mode = "landlock"
	// ModeNone: nothing is available; deployment code runs as Slipway's
	// user with only a scrubbed environment and its own session.
	ModeNone Mode = "none"
)

// Privileged reports whether the mode gives each deployment its own uid.
func (m Mode) Privileged() bool { return m == ModeNamespaces || m == ModeUID }

// namespaces reports whether the launcher runs in new namespaces.
func (m Mode) namespaces() bool { return m == ModeNamespaces || m == ModeUserNamespaces }

// landlock reports whether the launcher applies Landlock (when the kernel
// has it). ModeNamespaces does without: the mount namespace hides the data
// directory and the uid separates everything else.
func (m Mode) landlock() bool { return m == ModeUID || m == ModeUserNamespaces || m == ModeLandlock }

// Job is one program to run contained. Paths are absolute.
type Job struct {
	Mode Mode `json:"mode"`
	// DataDir is Slipway's data directory: hidden (namespaces) or denied
	// (Landlock), all but DeployDir.
	DataDir string `json:"data_dir"`
	// DeployDir is the deployment's own directory inside DataDir; the
	// job sees of it only what Binds name (all of it when Binds is empty,
	// as for the start-up probe), and may write there unless read-only.
	DeployDir string `json:"deploy_dir"`
	// Binds are the directories of DeployDir the job sees: in a mount
	// namespace the only ones bound back into the tmpfs that covers the
	// data directory, under Landlock the only ones it may read or write
	// there (see binds.go).
	Binds []Bind `json:"binds,omitempty"`
	// UID and GID are the deployment's ids (privileged modes only).
	UID int `json:"uid"`
	GID int `json:"gid"`
	// Dir is the working directory, inside DeployDir.
	Dir  string   `json:"dir"`
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	// Cgroups are the deployment's cgroup directories (Cgroups.Dirs): the
	// launcher joins them before anything else, so the job and all it
	// forks are counted against the deployment's limits.
	Cgroups []string `json:"cgroups,omitempty"`
	// KeepFDs are descriptors beyond stdin, stdout and stderr that cross
	// into the job: each must be a pipe the caller passed in
	// exec.Cmd.ExtraFiles (3 for the first). Every other one is closed.
	KeepFDs []int `json:"keep_fds,omitempty"`
	// Probe makes the launcher apply everything and exit 0 instead of
	// running Argv: how start-up finds out what works.
	Probe bool `json:"probe,omitempty"`

	// open are the Binds as the launcher opened them (openVisible).
	open openBinds
}

// Launcher starts jobs through the launcher subcommand of Bin.
type Launcher struct {
	// Bin is the binary that implements Subcommand (slipway itself).
	Bin  string
	Mode Mode
}

// Command returns the launcher invocation that runs job, not yet started.
// The launcher is a new session (Setsid: its own process group, which the
// caller may signal as a whole) and dies with Slipway (Pdeathsig).
func (l *Launcher) Command(ctx context.Context, job Job) (*exec.Cmd, error) {
	job.Mode = l.Mode
	if len(job.Argv) == 0 && !job.Probe {
		return nil, fmt.Errorf("sandbox: empty command")
	}
	raw, err := json.Marshal(job)
	if err != nil {
		return nil, fmt.Errorf("sandbox: encode job: %w", err)
	}
	cmd := exec.CommandContext(ctx, l.Bin, Subcommand)
	cmd.Env = []string{SpecEnv + "=" + string(raw)}
	attr := &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if l.Mode.namespaces() {
		attr.Cloneflags = syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC
	}
	if l.Mode == ModeUserNamespaces {
		// Slipway's own ids map to themselves: files keep their owner,
		// and nothing is gained that Slipway's user did not have.
		uid, gid := os.Getuid(), os.Getgid()
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		attr.GidMappingsEnableSetgroups = false
		// The launcher needs CAP_SYS_ADMIN in its namespace across its own
		// exec, to mount; it clears it before exec'ing the job, which then
		// has none (its uid is not 0).
		attr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN}
	}
	cmd.SysProcAttr = attr
	return cmd, nil
}

// What a mode does or does not give, in the words of the report; several
// modes share them.
const (
	ownUID      = "each deployment runs as its own uid/gid with no capabilities and no_new_privs: it cannot signal or ptrace Slipway or another agent, nor read their files"
	privateData = "the data directory is a tmpfs holding only what the job's own revision needs of its deployment (HOME, TMPDIR, its source and virtualenv, the agent's database): master key, database, uploads, admin socket, other deployments and the deployment's other revisions are not there"
	privateProc = "a private /proc shows only the deployment's own processes; /tmp, /var/tmp, /run/lock and /dev/shm are private tmpfs, emptied when the process tree that mounted them ends (nothing written there outlives it or reaches another deployment)"
	sharedUID   = "Slipway is not root: deployments share its uid, so file permissions do not separate them"
)

// Isolation describes a mode for operators: what holds and what does not.
func Isolation(m Mode, landlockABI int, notes []string) (mode string, guarantees, missing []string) {
	missing = append(missing, notes...)
	ll := landlockABI > 0 && m.landlock()
	switch m {
	case ModeNamespaces:
		mode = "per-deployment uid, mount/PID/IPC namespaces"
		guarantees = append(guarantees, ownUID, privateData, privateProc)
	case ModeUID:
		mode = "per-deployment uid, Landlock"
		guarantees = append(guarantees, ownUID+" (0700 directories)")
		missing = append(missing, "no mount/PID namespaces: other processes are visible in /proc (their environment and memory are not readable)")
	case ModeUserNamespaces:
		mode = "user/mount/PID/IPC namespaces, Landlock (shared uid)"
		guarantees = append(guarantees, privateData, privateProc)
		missing = append(missing, sharedUID)
	case ModeLandlock:
		mode = "Landlock (shared uid)"
		missing = append(missing,
			sharedUID,
			"no user namespaces: other processes are visible in /proc (Landlock denies reading their environment and memory)")
	default:
		mode = "same user as slipway (none)"
		missing = append(missing,
			"Slipway is not root and the kernel offers neither Landlock nor user namespaces: deployment code runs as Slipway's user and can read its data directory")
	}
	if t := tempDirsMissing(m, ll); t != "" {
		missing = append(missing, t)
	}
	if ll {
		g := fmt.Sprintf("Landlock ABI v%d: read and execute outside the data directory; of the data directory only its own revision's directories, which it may write, and /dev; no ptrace of processes outside the deployment", landlockABI)
		if landlockABI >= 6 {
			g += "; no signals or abstract unix sockets to processes outside it"
		}
		guarantees = append(guarantees, g)
		if landlockABI < 6 {
			missing = append(missing, fmt.Sprintf("Landlock ABI v%d has no signal scoping (v6): a deployment sharing Slipway's uid can signal Slipway", landlockABI))
		}
		if landlockABI < 9 {
			missing = append(missing, fmt.Sprintf("Landlock ABI v%d does not restrict connect() to pathname unix sockets (v9): the admin socket relies on its token file, which Landlock denies", landlockABI))
		}
	} else if m.landlock() {
		missing = append(missing, "the kernel has no Landlock")
	}
	guarantees = append(guarantees,
		"deployment code gets a scrubbed environment (its own secrets only), a new session, no inherited file descriptors but the pipes Slipway names (the agent's token, read and closed before any graph runs), no_new_privs, and HOME/TMPDIR inside its own directory",
		"each agent answers only requests carrying a token that Slipway gave it, so another deployment that reaches its port on 127.0.0.1 is refused")
	missing = append(missing,
		"the network namespace is shared: a deployment can connect to other agents' ports on 127.0.0.1 (they refuse it without their token), to Slipway's API (which needs a key), and to anything Slipway's host can reach")
	return mode, guarantees, missing
}

// scrub drops the variables a job must not inherit, whatever its caller
// passed: the launcher's own spec.
func scrub(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, SpecEnv+"=") {
			out = append(out, kv)
		}
	}
	return out
}
