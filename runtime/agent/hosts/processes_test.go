package hosts

import (
	"testing"
	"testing/fstest"
)

func TestAutoProcesses(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name string
		cpus int
		mem  int64
		want int
	}{
		{"one core", 1, 0, 1},
		{"two cores, no limit", 2, 0, 2},
		{"many cores are capped", 32, 0, maxAutoProcesses},
		{"the default 2 GiB limit", 8, 2048 * mib, 4},
		{"1 GiB", 8, 1024 * mib, 2},
		{"a small limit still runs one", 2, 192 * mib, 1},
		{"under one budget", 2, 600 * mib, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := autoProcesses(tc.cpus, tc.mem); got != tc.want {
				t.Errorf("autoProcesses(%d, %d MiB) = %d, want %d", tc.cpus, tc.mem/mib, got, tc.want)
			}
		})
	}
}

func TestCgroupMemoryLimit(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	for _, tc := range []struct {
		name  string
		files fstest.MapFS
		want  int64
	}{
		{"no cgroup file", fstest.MapFS{}, 0},
		{"v1 only", fstest.MapFS{"proc/self/cgroup": file("4:memory:/docker/abc\n")}, 0},
		{"own limit", fstest.MapFS{
			"proc/self/cgroup":                     file("0::/slipway/dep\n"),
			"sys/fs/cgroup/slipway/dep/memory.max": file("268435456\n"),
			"sys/fs/cgroup/slipway/memory.max":     file("max\n"),
		}, 256 << 20},
		{"an ancestor's smaller limit binds", fstest.MapFS{
			"proc/self/cgroup":             file("0::/a/b\n"),
			"sys/fs/cgroup/a/b/memory.max": file("max\n"),
			"sys/fs/cgroup/a/memory.max":   file("1073741824\n"),
		}, 1 << 30},
		{"no limit anywhere", fstest.MapFS{
			"proc/self/cgroup":         file("0::/\n"),
			"sys/fs/cgroup/memory.max": file("max\n"),
		}, 0},
		{"v1: the container's own root", fstest.MapFS{
			"proc/self/cgroup":                           file("12:pids:/docker/abc\n4:memory:/docker/abc\n"),
			"sys/fs/cgroup/memory/memory.limit_in_bytes": file("805306368\n"),
		}, 768 << 20},
		{"v1: no limit", fstest.MapFS{
			"proc/self/cgroup":                           file("4:memory:/\n"),
			"sys/fs/cgroup/memory/memory.limit_in_bytes": file("9223372036854771712\n"),
		}, 0},
		{"a path that climbs out stays under the root", fstest.MapFS{
			"proc/self/cgroup":             file("0::/../../etc\n"),
			"sys/fs/cgroup/etc/memory.max": file("536870912\n"),
		}, 512 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := cgroupMemoryLimit(tc.files); got != tc.want {
				t.Errorf("limit %d, want %d", got, tc.want)
			}
		})
	}
}
