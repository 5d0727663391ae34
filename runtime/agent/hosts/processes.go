package hosts

import (
	"bufio"
	"io/fs"
	"os"
	"path"
	"runtime"
	"strconv"
	"strings"
)

// Each process of a pool is budgeted this much of the agent's memory
// limit: a Python host with LangGraph and LangChain loaded holds about
// 150 MB before a graph keeps anything, a Node host about 100 MB.
const perProcessMemory = 512 << 20

// maxAutoProcesses bounds the default: past a few processes, an agent
// that needs more throughput wants more replicas, not a bigger one.
const maxAutoProcesses = 4

// AutoProcesses is how many processes a language host runs by default:
// one per core the agent may use (GOMAXPROCS, which follows the cgroup's
// CPU limit), at most maxAutoProcesses, and no more than its cgroup's
// memory limit budgets perProcessMemory each for.
func AutoProcesses() int {
	return autoProcesses(runtime.GOMAXPROCS(0), cgroupMemoryLimit(os.DirFS("/")))
}

// autoProcesses is AutoProcesses for a number of cores and a memory limit
// in bytes (0: none).
func autoProcesses(cpus int, memLimit int64) int {
	n := min(cpus, maxAutoProcesses)
	if memLimit > 0 {
		n = min(n, int(memLimit/perProcessMemory))
	}
	return max(n, 1)
}

// cgroupMemoryLimit is this process's cgroup memory limit in bytes, 0 when
// there is none or it cannot be read (no /proc or /sys). The limit that
// binds may be an ancestor's, so the smallest one up the tree is taken; in
// a container the tree's root is the container's own group.
func cgroupMemoryLimit(root fs.FS) int64 {
	f, err := root.Open("proc/self/cgroup")
	if err != nil {
		return 0
	}
	defer f.Close()
	var limit int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// v2: "0::<path>", memory.max; v1: "<n>:memory:<path>", memory.limit_in_bytes.
		var base, file, rest string
		if r, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			base, file, rest = "sys/fs/cgroup", "memory.max", r
		} else if _, r, ok := strings.Cut(sc.Text(), ":memory:"); ok {
			base, file, rest = "sys/fs/cgroup/memory", "memory.limit_in_bytes", r
		} else {
			continue
		}
		for dir := path.Join(base, path.Clean("/" + rest)[1:]); ; dir = path.Dir(dir) {
			if v := readLimit(root, path.Join(dir, file)); v > 0 && (limit == 0 || v < limit) {
				limit = v
			}
			if dir == base {
				break
			}
		}
	}
	return limit
}

// readLimit is a memory limit file's value, 0 for none ("max", or v1's
// page-rounded maximum) or an unreadable file.
func readLimit(root fs.FS, name string) int64 {
	b, err := fs.ReadFile(root, name)
	if err != nil {
		return 0
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v <= 0 || v >= 1<<62 {
		return 0
	}
	return v
}
