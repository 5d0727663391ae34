package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadCgroupMounts(t *testing.T) {
	info := filepath.Join(t.TempDir(), "mountinfo")
	lines := []string{
		"31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755",
		"32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:1 - cgroup cgroup rw,cpu,cpuacct",
		"35 31 0:32 /docker/abc /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory",
		"40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd",
		`41 31 0:38 / /sys/fs/cgroup/uni\040fied rw,relatime - cgroup2 cgroup2 rw`,
	}
	if err := os.WriteFile(info, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readCgroupMounts(info)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("%d cgroup mounts: %+v", len(got), got)
	}
	cases := []struct {
		i                   int
		point, root, fstype string
		ctrls               string
	}{
		{0, "/sys/fs/cgroup/cpu,cpuacct", "/", "cgroup", "cpu,cpuacct"},
		{1, "/sys/fs/cgroup/memory", "/docker/abc", "cgroup", "memory"},
		{2, "/sys/fs/cgroup/systemd", "/", "cgroup", ""},
		{3, "/sys/fs/cgroup/uni fied", "/", "cgroup2", ""},
	}
	for _, c := range cases {
		m := got[c.i]
		if m.point != c.point || m.root != c.root || m.fstype != c.fstype || strings.Join(v1Controllers(m.options), ",") != c.ctrls {
			t.Errorf("mount %d: %+v (controllers %v), want %+v", c.i, m, v1Controllers(m.options), c)
		}
	}
	if rel := relCgroup("/docker/abc/sub", "/docker/abc"); rel != "/sub" {
		t.Errorf("relCgroup: %q", rel)
	}
}

// fakeHierarchy makes dir look like a cgroup directory to setupCgroups:
// the kernel's files are plain files here, and the test reads back what
// was written.
func fakeHierarchy(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(raw))
}

// TestCgroupLimitFiles: the limits land in the files of each version, and
// "no limit" is written as the kernel spells it.
func TestCgroupLimitFiles(t *testing.T) {
	limited := CgroupLimits{MemoryBytes: 256 << 20, MemoryLowBytes: 128 << 20, PIDs: 64, CPUs: 1.5, CPUWeightCores: 0.5}
	cases := []struct {
		name   string
		limits CgroupLimits
		v1     map[string]string // controller/file → value
		v2     map[string]string // file → value
	}{
		{"limited", limited,
			map[string]string{"memory/memory.limit_in_bytes": "268435456", "memory/memory.soft_limit_in_bytes": "134217728",
				"pids/pids.max": "64", "cpu/cpu.cfs_quota_us": "150000", "cpu/cpu.cfs_period_us": "100000", "cpu/cpu.shares": "512"},
			map[string]string{"memory.max": "268435456", "memory.low": "134217728", "pids.max": "64", "cpu.max": "150000 100000", "cpu.weight": "50"}},
		{"unlimited", CgroupLimits{},
			map[string]string{"memory/memory.limit_in_bytes": "-1", "memory/memory.soft_limit_in_bytes": "-1",
				"pids/pids.max": "max", "cpu/cpu.cfs_quota_us": "-1", "cpu/cpu.shares": "1024"},
			map[string]string{"memory.max": "max", "memory.low": "0", "pids.max": "max", "cpu.max": "max 100000", "cpu.weight": "100"}},
	}
	for _, c := range cases {
		t.Run("v1 "+c.name, func(t *testing.T) {
			root := t.TempDir()
			var mounts []mountEntry
			own := map[string]string{}
			for _, ctrl := range []string{"memory", "pids", "cpu"} {
				fakeHierarchy(t, filepath.Join(root, ctrl, "slice"), nil)
				mounts = append(mounts, mountEntry{root: "/", point: filepath.Join(root, ctrl), fstype: "cgroup", options: []string{"rw", ctrl}})
				own[ctrl] = "/slice"
			}
			cg, err := setupCgroups(mounts, own, "slipway-test")
			if err != nil {
				t.Fatal(err)
			}
			if err := cg.Apply("dep-1", c.limits); err != nil {
				t.Fatal(err)
			}
			if d := cg.Dirs("dep-1"); len(d) != 3 || d[0] != filepath.Join(root, "memory", "slice", "slipway-test", "dep-1") {
				t.Fatalf("dirs %v", d)
			}
			for file, want := range c.v1 {
				ctrl, name, _ := strings.Cut(file, "/")
				if got := readFile(t, filepath.Join(root, ctrl, "slice", "slipway-test", "dep-1", name)); got != want {
					t.Errorf("%s = %q, want %q", file, got, want)
				}
			}
		})
		t.Run("v2 "+c.name, func(t *testing.T) {
			root := t.TempDir()
			// Slipway in the root cgroup: no process has to move.
			fakeHierarchy(t, root, map[string]string{"cgroup.controllers": "cpuset cpu io memory pids", "cgroup.subtree_control": ""})
			cg, err := setupCgroups([]mountEntry{{root: "/", point: root, fstype: "cgroup2"}}, map[string]string{"": "/"}, "slipway-test")
			if err != nil {
				t.Fatal(err)
			}
			if err := cg.Apply("dep-1", c.limits); err != nil {
				t.Fatal(err)
			}
			if d := cg.Dirs("dep-1"); len(d) != 1 || d[0] != filepath.Join(root, "slipway-test", "dep-1") {
				t.Fatalf("dirs %v", d)
			}
			for file, want := range c.v2 {
				if got := readFile(t, filepath.Join(root, "slipway-test", "dep-1", file)); got != want {
					t.Errorf("%s = %q, want %q", file, got, want)
				}
			}
		})
	}
}

// TestCgroupSetupRefuses: no usable hierarchy, a v2 cgroup without the
// controllers, a v2 cgroup that is not Slipway's to reorganise, and a
// deployment id that would name a path or a kernel file.
func TestCgroupSetupRefuses(t *testing.T) {
	root := t.TempDir()
	fakeHierarchy(t, filepath.Join(root, "user.slice"), map[string]string{"cgroup.controllers": "memory pids cpu", "cgroup.subtree_control": "", "cgroup.procs": "1\n"})
	fakeHierarchy(t, filepath.Join(root, "poor"), map[string]string{"cgroup.controllers": "cpu"})
	v2 := []mountEntry{{root: "/", point: root, fstype: "cgroup2"}}
	cases := []struct {
		name   string
		mounts []mountEntry
		own    map[string]string
		want   string
	}{
		{"nothing mounted", nil, map[string]string{}, "no cgroup v1 memory and pids"},
		{"v2 without memory and pids", v2, map[string]string{"": "/poor"}, "not memory and pids"},
		{"v2 not delegated", v2, map[string]string{"": "/user.slice"}, "not delegated"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := setupCgroups(c.mounts, c.own, "slipway-test"); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
	fakeHierarchy(t, filepath.Join(root, "ok"), map[string]string{"cgroup.controllers": "memory pids", "cgroup.subtree_control": "memory pids"})
	cg, err := setupCgroups(v2, map[string]string{"": "/ok"}, "slipway-test")
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range []string{"../escape", "cgroup.procs", "", "a/b", ".hidden"} {
		if err := cg.Apply(dep, CgroupLimits{}); err == nil {
			t.Errorf("deployment id %q named a cgroup", dep)
		}
	}
}
