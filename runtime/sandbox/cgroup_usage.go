package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Usage reads the deployment's CPU time (seconds) and memory in use
// (bytes, without inactive page cache) from its cgroup; -1 for what the
// hierarchy does not count. ok is false when neither is known.
func (c *Cgroups) Usage(dep string) (cpuSeconds float64, memBytes int64, ok bool) {
	cpuSeconds, memBytes = -1, -1
	if c == nil || !cgroupName.MatchString(dep) {
		return cpuSeconds, memBytes, false
	}
	if c.version == 2 {
		dir := ""
		for _, ctrl := range cgroupControllers {
			if p := c.parents[ctrl]; p != "" {
				dir = filepath.Join(p, dep) // one directory for every controller
				break
			}
		}
		if dir == "" {
			return cpuSeconds, memBytes, false
		}
		if usec, found := statKey(filepath.Join(dir, "cpu.stat"), "usage_usec"); found {
			cpuSeconds = float64(usec) / 1e6
		}
		if cur, err := readInt(filepath.Join(dir, "memory.current")); err == nil {
			memBytes = cur
			if inactive, found := statKey(filepath.Join(dir, "memory.stat"), "inactive_file"); found && inactive <= cur {
				memBytes = cur - inactive
			}
		}
	} else {
		// v1: cpuacct is mounted with cpu on every common layout.
		if p := c.parents["cpu"]; p != "" {
			if ns, err := readInt(filepath.Join(p, dep, "cpuacct.usage")); err == nil {
				cpuSeconds = float64(ns) / 1e9
			}
		}
		if p := c.parents["memory"]; p != "" {
			if cur, err := readInt(filepath.Join(p, dep, "memory.usage_in_bytes")); err == nil {
				memBytes = cur
				if inactive, found := statKey(filepath.Join(p, dep, "memory.stat"), "total_inactive_file"); found && inactive <= cur {
					memBytes = cur - inactive
				}
			}
		}
	}
	return cpuSeconds, memBytes, cpuSeconds >= 0 || memBytes >= 0
}

// statKey reads key's value from a "key value" per line file.
func statKey(path, key string) (int64, bool) {
	raw, err := os.ReadFile(path)
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

func readInt(path string) (int64, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
}
