package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCgroupUsage reads a deployment's CPU time and memory from the
// files of cgroup v2 and v1 (directories laid out as the kernel does):
// memory leaves out the inactive page cache, a missing file is unknown
// (-1), and a deployment id that is not a cgroup name reads nothing.
func TestCgroupUsage(t *testing.T) {
	cases := []struct {
		name    string
		version int
		files   map[string]string // path under the deployment's dir (v2) or ctrl/file (v1)
		dep     string
		cpu     float64
		mem     int64
		ok      bool
	}{
		{"v2", 2, map[string]string{
			"cpu.stat":       "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n",
			"memory.current": "104857600\n",
			"memory.stat":    "anon 50000000\nfile 60000000\ninactive_file 4857600\n",
		}, "dep1", 2.5, 100000000, true},
		{"v2 without memory.stat", 2, map[string]string{"memory.current": "4096\n"}, "dep1", -1, 4096, true},
		{"v2 nothing", 2, map[string]string{}, "dep1", -1, -1, false},
		{"v1", 1, map[string]string{
			"cpu/cpuacct.usage":            "1500000000\n",
			"memory/memory.usage_in_bytes": "2048000\n",
			"memory/memory.stat":           "cache 100\ntotal_inactive_file 48000\n",
		}, "dep1", 1.5, 2000000, true},
		{"not a cgroup name", 2, map[string]string{"memory.current": "1\n"}, "../dep1", -1, -1, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			cg := &Cgroups{version: c.version, parents: map[string]string{}}
			if c.version == 2 {
				for _, ctrl := range cgroupControllers {
					cg.parents[ctrl] = root
				}
			} else {
				for _, ctrl := range cgroupControllers {
					cg.parents[ctrl] = filepath.Join(root, ctrl)
				}
			}
			for name, body := range c.files {
				dir := filepath.Join(root, "dep1")
				if c.version == 1 {
					ctrl, file := filepath.Split(name)
					dir, name = filepath.Join(root, ctrl, "dep1"), file
				}
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cpu, mem, ok := cg.Usage(c.dep)
			if cpu != c.cpu || mem != c.mem || ok != c.ok {
				t.Fatalf("Usage = %v s, %v B, %v; want %v s, %v B, %v", cpu, mem, ok, c.cpu, c.mem, c.ok)
			}
		})
	}
	if _, _, ok := (*Cgroups)(nil).Usage("dep1"); ok {
		t.Fatal("a nil *Cgroups reported usage")
	}
}
