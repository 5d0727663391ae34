package sandbox

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Resource limits of the process runtime. Every process a deployment runs
// (install and build commands, the agent, its command graphs and language
// hosts) lives in one cgroup of the deployment's own, which the launcher
// joins before it drops privileges and execs the job: the kernel counts
// and bounds the whole tree there, whatever it forks, so that a fork bomb
// or a memory hog in one deployment runs into its own limits and not into
// the host's or another deployment's.
//
// The layout, under the cgroup Slipway itself runs in (its own for each
// v1 hierarchy):
//
//	<Slipway's cgroup>/slipway-<install>/<deployment id>/
//
// <install> is derived from the data directory, so that two installs (or
// two test servers) on one host never share a deployment's cgroup. On
// cgroup v2 a cgroup with processes cannot hand controllers to its
// children: when Slipway's cgroup is delegated to it (systemd's
// Delegate=yes, which marks it with the xattr trusted.delegate) and still
// holds processes, Slipway first moves them into <its cgroup>/supervisor.

// cgroupControllers are the controllers the limits use.
var cgroupControllers = []string{"memory", "pids", "cpu"}

// cpuPeriod is the CFS period the CPU quota is expressed in (100 ms, the
// kernel's and Docker's default).
const cpuPeriod = 100000

// CgroupLimits are one deployment's limits; zero means none.
type CgroupLimits struct {
	MemoryBytes    int64   // hard limit, swap included (the OOM killer acts inside the cgroup)
	MemoryLowBytes int64   // memory_mb: protected from reclaim (v2) or the soft limit (v1)
	PIDs           int64   // processes and threads
	CPUs           float64 // quota in cores per period
	CPUWeightCores float64 // cpu: the relative share, in cores (1 core = weight 100 / 1024 shares)
}

// Cgroups creates, limits and removes the deployments' cgroups. A nil
// *Cgroups enforces nothing.
type Cgroups struct {
	version int
	// parents maps each controller in use to the install's cgroup
	// directory in its hierarchy (one directory for all on v2).
	parents map[string]string
	// root is the cgroup filesystem's mount point (v2) or "" (v1).
	root string
}

// cgroupName is what a deployment id must look like to name a cgroup:
// never a path, never one of the kernel's "cgroup.*" files.
var cgroupName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

// mountEntry is one cgroup filesystem from /proc/self/mountinfo.
type mountEntry struct {
	root, point, fstype string
	options             []string // super options: the v1 controllers
}

// SetupCgroups finds the cgroup hierarchy this host offers Slipway and
// creates the install's parent cgroup in it. dataDir names the install.
// The error says why no limits can be enforced.
func SetupCgroups(dataDir string) (*Cgroups, error) {
	mounts, err := readCgroupMounts("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	own, err := readOwnCgroups("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	return setupCgroups(mounts, own, installName(dataDir))
}

// installName is the install's parent cgroup: its data directory, hashed.
func installName(dataDir string) string {
	sum := sha256.Sum256([]byte(dataDir))
	return "slipway-" + hex.EncodeToString(sum[:6])
}

func setupCgroups(mounts []mountEntry, own map[string]string, install string) (*Cgroups, error) {
	var why []string
	// cgroup v2 first, when it holds the controllers (a unified host).
	for _, m := range mounts {
		if m.fstype != "cgroup2" {
			continue
		}
		path, ok := own[""]
		if !ok {
			break
		}
		base := filepath.Join(m.point, relCgroup(path, m.root))
		avail := readWords(filepath.Join(base, "cgroup.controllers"))
		if !slices.Contains(avail, "memory") || !slices.Contains(avail, "pids") {
			why = append(why, fmt.Sprintf("cgroup v2 at %s offers Slipway's cgroup the controllers %q, not memory and pids", m.point, strings.Join(avail, " ")))
			break
		}
		c, err := setupV2(m.point, base, install, avail)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	// cgroup v1 (or the hybrid layout): one hierarchy per controller.
	c := &Cgroups{version: 1, parents: map[string]string{}}
	for _, ctrl := range cgroupControllers {
		for _, m := range mounts {
			if m.fstype != "cgroup" || !slices.Contains(m.options, ctrl) {
				continue
			}
			path, ok := own[strings.Join(v1Controllers(m.options), ",")]
			if !ok {
				continue
			}
			dir := filepath.Join(m.point, relCgroup(path, m.root), install)
			if err := mkdirCgroup(dir); err != nil {
				return nil, fmt.Errorf("cgroup v1 %s: %w", ctrl, err)
			}
			c.parents[ctrl] = dir
			break
		}
	}
	if c.parents["memory"] == "" || c.parents["pids"] == "" {
		why = append(why, "no cgroup v1 memory and pids hierarchies are mounted")
		return nil, errors.New(strings.Join(why, "; "))
	}
	return c, nil
}

// setupV2 makes base's children able to use the controllers and creates
// the install's cgroup below it.
func setupV2(root, base, install string, avail []string) (*Cgroups, error) {
	enabled := readWords(filepath.Join(base, "cgroup.subtree_control"))
	if base != root && (!slices.Contains(enabled, "memory") || !slices.Contains(enabled, "pids")) {
		// The "no internal processes" rule: base must hold no process
		// before its children get controllers. Only a cgroup delegated to
		// Slipway is reorganised so.
		if !delegated(base) {
			return nil, fmt.Errorf("cgroup v2: Slipway's cgroup %s is not delegated to it (run it under the unit install.sh writes, which has Delegate=yes)", base)
		}
		if err := vacate(base, filepath.Join(base, "supervisor")); err != nil {
			return nil, err
		}
	}
	var ctrls []string
	for _, ctrl := range cgroupControllers {
		if slices.Contains(avail, ctrl) {
			ctrls = append(ctrls, ctrl)
		}
	}
	parent := filepath.Join(base, install)
	if err := enableControllers(base, ctrls); err != nil {
		return nil, err
	}
	if err := mkdirCgroup(parent); err != nil {
		return nil, fmt.Errorf("cgroup v2: %w", err)
	}
	if err := enableControllers(parent, ctrls); err != nil {
		return nil, err
	}
	c := &Cgroups{version: 2, parents: map[string]string{}, root: root}
	for _, ctrl := range ctrls {
		c.parents[ctrl] = parent
	}
	return c, nil
}

// delegated reports whether the cgroup v2 directory is Slipway's to
// reorganise: systemd marks a unit's cgroup it delegated (Delegate=yes)
// with the xattr trusted.delegate (since systemd 251); with an older one,
// a cgroup that holds Slipway alone is its service's.
func delegated(dir string) bool {
	if _, err := unix.Getxattr(dir, "trusted.delegate", nil); err == nil {
		return true
	}
	procs := readWords(filepath.Join(dir, "cgroup.procs"))
	return len(procs) == 1 && procs[0] == strconv.Itoa(os.Getpid())
}

// vacate moves every process of cgroup dir into the leaf to (created).
func vacate(dir, to string) error {
	if err := mkdirCgroup(to); err != nil {
		return fmt.Errorf("cgroup v2: %w", err)
	}
	for range 20 {
		pids := readWords(filepath.Join(dir, "cgroup.procs"))
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			err := os.WriteFile(filepath.Join(to, "cgroup.procs"), []byte(pid), 0)
			if err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("cgroup v2: move process %s into %s: %w", pid, to, err)
			}
		}
	}
	return fmt.Errorf("cgroup v2: processes keep appearing in %s", dir)
}

func enableControllers(dir string, ctrls []string) error {
	enabled := readWords(filepath.Join(dir, "cgroup.subtree_control"))
	for _, ctrl := range ctrls {
		if slices.Contains(enabled, ctrl) {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+ctrl), 0); err != nil {
			return fmt.Errorf("cgroup v2: enable %s in %s: %w", ctrl, dir, err)
		}
	}
	return nil
}

// Describe names the mechanism and its controllers, for the isolation
// report.
func (c *Cgroups) Describe() string {
	var ctrls []string
	for _, ctrl := range cgroupControllers {
		if c.parents[ctrl] != "" {
			ctrls = append(ctrls, ctrl)
		}
	}
	return fmt.Sprintf("cgroup v%d (%s)", c.version, strings.Join(ctrls, ", "))
}

// Has reports whether the controller is in use.
func (c *Cgroups) Has(ctrl string) bool { return c != nil && c.parents[ctrl] != "" }

// Dirs are the deployment's cgroup directories, one per hierarchy: what a
// job joins (Job.Cgroups).
func (c *Cgroups) Dirs(dep string) []string {
	if c == nil {
		return nil
	}
	var dirs []string
	for _, ctrl := range cgroupControllers {
		p := c.parents[ctrl]
		if p == "" {
			continue
		}
		d := filepath.Join(p, dep)
		if !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// Exists reports whether the deployment's cgroup is there (Apply ran).
func (c *Cgroups) Exists(dep string) bool {
	for _, d := range c.Dirs(dep) {
		if !fileExists(d) {
			return false
		}
	}
	return c != nil
}

// Apply creates the deployment's cgroup if needed and sets its limits.
func (c *Cgroups) Apply(dep string, l CgroupLimits) error {
	if c == nil {
		return nil
	}
	if !cgroupName.MatchString(dep) {
		return fmt.Errorf("cgroup: deployment id %q cannot name a cgroup", dep)
	}
	// The install's cgroup goes when Slipway stops (Close); a deploy after
	// that (tests) brings it back.
	for _, p := range c.parents {
		if err := mkdirCgroup(p); err != nil {
			return fmt.Errorf("cgroup: %w", err)
		}
		if c.version == 2 {
			if err := enableControllers(p, slices.Collect(maps.Keys(c.parents))); err != nil {
				return err
			}
		}
	}
	for _, d := range c.Dirs(dep) {
		if err := mkdirCgroup(d); err != nil {
			return fmt.Errorf("cgroup: %w", err)
		}
	}
	if c.version == 2 {
		return c.applyV2(filepath.Join(c.parents["memory"], dep), l)
	}
	return c.applyV1(dep, l)
}

func (c *Cgroups) applyV2(dir string, l CgroupLimits) error {
	w := func(file, val string) error {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(val), 0); err != nil {
			return fmt.Errorf("cgroup: set %s: %w", file, err)
		}
		return nil
	}
	if err := w("memory.max", maxOr(l.MemoryBytes)); err != nil {
		return err
	}
	// No swap beside the limit, like memory.memsw on v1: a hog is killed
	// at the limit instead of pushing the host into swap.
	if _, err := os.Stat(filepath.Join(dir, "memory.swap.max")); err == nil {
		swap := "max"
		if l.MemoryBytes > 0 {
			swap = "0"
		}
		if err := w("memory.swap.max", swap); err != nil {
			return err
		}
	}
	if err := w("memory.low", strconv.FormatInt(min(l.MemoryLowBytes, nonZero(l.MemoryBytes)), 10)); err != nil {
		return err
	}
	if err := w("pids.max", maxOr(l.PIDs)); err != nil {
		return err
	}
	if c.Has("cpu") {
		quota := "max"
		if l.CPUs > 0 {
			quota = strconv.FormatInt(max(1000, int64(l.CPUs*cpuPeriod)), 10)
		}
		if err := w("cpu.max", quota+" "+strconv.Itoa(cpuPeriod)); err != nil {
			return err
		}
		weight := int64(100)
		if l.CPUWeightCores > 0 {
			weight = min(10000, max(1, int64(l.CPUWeightCores*100)))
		}
		if err := w("cpu.weight", strconv.FormatInt(weight, 10)); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cgroups) applyV1(dep string, l CgroupLimits) error {
	w := func(ctrl, file, val string) error {
		if err := os.WriteFile(filepath.Join(c.parents[ctrl], dep, file), []byte(val), 0); err != nil {
			return fmt.Errorf("cgroup: set %s: %w", file, err)
		}
		return nil
	}
	mem := int64(-1)
	if l.MemoryBytes > 0 {
		mem = l.MemoryBytes
	}
	memStr := strconv.FormatInt(mem, 10)
	// memsw (memory + swap) must stay at least the memory limit: a limit
	// raised above it fails until memsw has gone up first.
	memsw := fileExists(filepath.Join(c.parents["memory"], dep, "memory.memsw.limit_in_bytes"))
	if err := w("memory", "memory.limit_in_bytes", memStr); err != nil {
		if !memsw {
			return err
		}
		if err := w("memory", "memory.memsw.limit_in_bytes", memStr); err != nil {
			return err
		}
		if err := w("memory", "memory.limit_in_bytes", memStr); err != nil {
			return err
		}
	}
	// Equal to the memory limit: no swap beside it, so a hog is killed at
	// the limit instead of pushing the host into swap.
	if memsw {
		if err := w("memory", "memory.memsw.limit_in_bytes", memStr); err != nil {
			return err
		}
	}
	soft := int64(-1)
	if l.MemoryLowBytes > 0 {
		soft = l.MemoryLowBytes
	}
	if err := w("memory", "memory.soft_limit_in_bytes", strconv.FormatInt(soft, 10)); err != nil {
		return err
	}
	if err := w("pids", "pids.max", maxOr(l.PIDs)); err != nil {
		return err
	}
	if c.Has("cpu") {
		quota := int64(-1)
		if l.CPUs > 0 {
			quota = max(1000, int64(l.CPUs*cpuPeriod))
		}
		if err := w("cpu", "cpu.cfs_period_us", strconv.Itoa(cpuPeriod)); err != nil {
			return err
		}
		if err := w("cpu", "cpu.cfs_quota_us", strconv.FormatInt(quota, 10)); err != nil {
			return err
		}
		shares := int64(1024)
		if l.CPUWeightCores > 0 {
			shares = max(2, int64(l.CPUWeightCores*1024))
		}
		if err := w("cpu", "cpu.shares", strconv.FormatInt(shares, 10)); err != nil {
			return err
		}
	}
	return nil
}

// Remove kills whatever still runs in the deployment's cgroup (a daemon
// that left the agent's process group: nothing leaves its cgroup) and
// removes it.
func (c *Cgroups) Remove(dep string) error {
	if c == nil || !cgroupName.MatchString(dep) {
		return nil
	}
	dirs := c.Dirs(dep)
	if err := killCgroups(dirs, 5*time.Second); err != nil {
		return err
	}
	for _, d := range dirs {
		if err := rmdirCgroup(d, 2*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// Close removes the install's parent cgroups if no deployment's is left
// in them (Slipway stops; they come back at the next start).
func (c *Cgroups) Close() {
	if c == nil {
		return
	}
	seen := map[string]bool{}
	for _, p := range c.parents {
		if seen[p] {
			continue
		}
		seen[p] = true
		entries, _ := os.ReadDir(p)
		for _, e := range entries {
			if e.IsDir() && cgroupName.MatchString(e.Name()) {
				// Empty ones only: rmdir refuses a cgroup with processes.
				_ = unix.Rmdir(filepath.Join(p, e.Name()))
			}
		}
		_ = unix.Rmdir(p)
	}
}

// Events reads a counter of the deployment's memory cgroup: "oom_kill"
// (processes the OOM killer ended there). ok is false when the kernel
// does not count it.
func (c *Cgroups) Events(dep, key string) (n int64, ok bool) {
	if !c.Has("memory") {
		return 0, false
	}
	file := "memory.oom_control"
	if c.version == 2 {
		file = "memory.events"
	}
	raw, err := os.ReadFile(filepath.Join(c.parents["memory"], dep, file))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, found := strings.Cut(line, " "); found && k == key {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// killCgroups SIGKILLs every process of dirs until none is left. A
// process forking meanwhile is bounded by pids.max and caught on the
// next round.
func killCgroups(dirs []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		left := 0
		for _, d := range dirs {
			if kill := filepath.Join(d, "cgroup.kill"); fileExists(kill) {
				_ = os.WriteFile(kill, []byte("1"), 0)
			}
			for _, p := range readWords(filepath.Join(d, "cgroup.procs")) {
				if pid, err := strconv.Atoi(p); err == nil && pid > 0 {
					left++
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup: %d processes of the deployment survive SIGKILL", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rmdirCgroup removes an empty cgroup; processes that were just killed may
// take a moment to leave it.
func rmdirCgroup(dir string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := unix.Rmdir(dir)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("cgroup: remove %s: %w", dir, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// joinCgroups moves the calling process (the launcher, before it execs
// the job) into each cgroup: "0" is the writer itself, in any PID
// namespace.
func joinCgroups(dirs []string) error {
	for _, d := range dirs {
		if !filepath.IsAbs(d) {
			return fmt.Errorf("cgroup %q is not an absolute path", d)
		}
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte("0"), 0); err != nil {
			return fmt.Errorf("join the deployment's cgroup: %w", err)
		}
	}
	return nil
}

func mkdirCgroup(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return nil
}

// relCgroup is a process's cgroup path relative to the mount of its
// hierarchy (whose root may itself be a cgroup, in a container).
func relCgroup(path, mountRoot string) string {
	if mountRoot != "/" {
		if rel, ok := strings.CutPrefix(path, mountRoot); ok {
			return rel
		}
	}
	return path
}

// v1Controllers are the controllers among a v1 mount's super options
// (rw, name=..., and the like are not).
func v1Controllers(opts []string) []string {
	var out []string
	for _, o := range opts {
		switch {
		case o == "rw" || o == "ro" || strings.Contains(o, "="):
		case o == "clone_children" || o == "noprefix" || o == "xattr" || o == "cpuset_v2_mode":
		default:
			out = append(out, o)
		}
	}
	return out
}

// readCgroupMounts lists the cgroup filesystems of mountinfo.
func readCgroupMounts(path string) ([]mountEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	defer f.Close()
	var out []mountEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(b) < 3 || (b[0] != "cgroup" && b[0] != "cgroup2") {
			continue
		}
		out = append(out, mountEntry{root: unescapeMount(a[3]), point: unescapeMount(a[4]), fstype: b[0], options: strings.Split(b[2], ",")})
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// readOwnCgroups maps each hierarchy's controllers ("memory",
// "cpu,cpuacct"; "" for v2) to this process's cgroup in it.
func readOwnCgroups(path string) (map[string]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 {
			out[parts[1]] = parts[2]
		}
	}
	return out, nil
}

func readWords(path string) []string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return strings.Fields(string(raw))
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func maxOr(n int64) string {
	if n <= 0 {
		return "max"
	}
	return strconv.FormatInt(n, 10)
}

// nonZero is n, or the largest int64 when n is 0 (no limit).
func nonZero(n int64) int64 {
	if n <= 0 {
		return 1<<63 - 1
	}
	return n
}
