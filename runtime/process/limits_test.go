package process

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"slipway/runtime"
	"slipway/runtime/sandbox"
)

// limitedDriver is newDriver with the given default limits; it skips the
// test (fails it under CI=true) when this host gives Slipway no cgroups
// to enforce them with.
func limitedDriver(t *testing.T, l Limits) *Driver {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("the resource limit tests run as root in CI")
		}
		t.Skip("skipping: cgroups need root here")
	}
	d := &Driver{Bin: standin(t), Launcher: os.Args[0], Root: filepath.Join(t.TempDir(), "deployments"),
		UIDLow: 200000, UIDHigh: 265535, Gate: &runtime.Gate{}, Limits: l,
		HealthTimeout: 5 * time.Second, StopGrace: 2 * time.Second}
	if err := d.Init(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.StopAll)
	if d.cgroups == nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no cgroups for resource limits on the CI host: %v", d.Isolation().Missing)
		}
		t.Skipf("skipping: no cgroups for resource limits here: %v", d.Isolation().Missing)
	}
	return d
}

// specOf is spec for another deployment.
func specOf(t *testing.T, dep, config string) runtime.Spec {
	s := spec(t, "rev1", config, nil)
	s.DeploymentID = dep
	return s
}

// answers reports whether the deployment's agent answers GET /ok.
func answers(t *testing.T, d *Driver, dep string) bool {
	t.Helper()
	ep, ok := d.Endpoint(dep)
	return ok && strings.Contains(get(t, ep+"/ok"), `"ok":true`)
}

// hostForks checks that the host (this test process) can still start a
// process.
func hostForks(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("true").CombinedOutput(); err != nil {
		t.Fatalf("the host cannot start a process: %v %s", err, out)
	}
}

// TestForkBombStaysInItsCgroup: a deployment's code starts processes
// until it cannot (at most 2,000). It gets no further than the pids limit
// of its own cgroup, while it, another deployment and the host go on
// answering.
func TestForkBombStaysInItsCgroup(t *testing.T) {
	const limit = 64
	d := limitedDriver(t, Limits{MemoryMB: 512, PIDs: limit})
	for _, dep := range []string{"bomb", "bystander"} {
		if _, err := deploy(t, d, specOf(t, dep, `{"name":"`+dep+`"}`)); err != nil {
			t.Fatalf("%s: %v", dep, err)
		}
	}
	ep, _ := d.Endpoint("bomb")
	start := time.Now()
	out := get(t, ep+"/spawn?n=2000")
	t.Logf("fork bomb: %s in %v", out, time.Since(start))
	m := regexp.MustCompile(`started (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the fork bomb said %q", out)
	}
	if n, _ := strconv.Atoi(m[1]); n >= limit {
		t.Fatalf("the deployment started %d processes; its limit is %d in all", n, limit)
	}
	for _, dep := range []string{"bystander", "bomb"} {
		if !answers(t, d, dep) {
			t.Fatalf("%s does not answer after the fork bomb", dep)
		}
	}
	hostForks(t)
}

// TestMemoryHogIsKilledInItsCgroup: a deployment limited to 256 MiB
// tries to allocate 2 GiB in a child process. The OOM killer ends the
// child inside the deployment's cgroup; the deployment's agent, another
// deployment and the host go on.
func TestMemoryHogIsKilledInItsCgroup(t *testing.T) {
	d := limitedDriver(t, Limits{MemoryMB: 2048, PIDs: 1024})
	hog := specOf(t, "hog", `{"name":"hog"}`)
	mb := 256
	hog.ResourceSpec = &runtime.ResourceSpec{MemoryLimitMB: &mb}
	if _, err := deploy(t, d, hog); err != nil {
		t.Fatal(err)
	}
	if _, err := deploy(t, d, specOf(t, "bystander", `{"name":"bystander"}`)); err != nil {
		t.Fatal(err)
	}
	ep, _ := d.Endpoint("hog")
	start := time.Now()
	out := get(t, ep+"/hog?mb=2048")
	t.Logf("memory hog: %q in %v", out, time.Since(start))
	if strings.Contains(out, "allocated") || !strings.Contains(out, "killed") {
		t.Fatalf("a 2 GiB allocation under a 256 MiB limit ended %q", out)
	}
	if n, ok := d.cgroups.Events("hog", "oom_kill"); ok && n < 1 {
		t.Fatalf("the hog's cgroup counts %d OOM kills", n)
	}
	for _, dep := range []string{"bystander", "hog"} {
		if !answers(t, d, dep) {
			t.Fatalf("%s does not answer after the memory hog", dep)
		}
	}
	hostForks(t)
}

// TestRemoveKillsWhatTheDeploymentLeft: a process that left the agent's
// process group still dies with its deployment (its cgroup), and the
// cgroup goes.
func TestRemoveKillsWhatTheDeploymentLeft(t *testing.T) {
	d := limitedDriver(t, Limits{MemoryMB: 512, PIDs: 256})
	s := specOf(t, "leaver", `{}`)
	if _, err := deploy(t, d, s); err != nil {
		t.Fatal(err)
	}
	dirs := d.cgroups.Dirs("leaver")
	if len(dirs) == 0 {
		t.Fatal("the deployment has no cgroup")
	}
	// A process of the host placed in the deployment's cgroup stands in
	// for one that left the agent's process group.
	stray := exec.Command("sleep", "60")
	if err := stray.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- stray.Wait() }()
	for _, dir := range dirs {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(stray.Process.Pid)), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Remove(context.Background(), "leaver"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = stray.Process.Kill()
		t.Fatal("a process in the deployment's cgroup survived Remove")
	}
	for _, dir := range dirs {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("the deployment's cgroup is still there: %v", err)
		}
	}
}

// TestFreedUIDLeavesNothing: a deployment writes files to /tmp, /var/tmp,
// /run/lock and /dev/shm and is deleted; the next deployment, which gets
// its uid (the range holds one), finds none of them, and none reached the
// host.
func TestFreedUIDLeavesNothing(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("the uid tests run as root in CI")
		}
		t.Skip("skipping: per-deployment uids need root")
	}
	// One uid, far from those other tests allocate first.
	uid := 230000 + rand.IntN(30000)
	d := &Driver{Bin: standin(t), Launcher: os.Args[0], Root: filepath.Join(t.TempDir(), "deployments"),
		UIDLow: uid, UIDHigh: uid, Gate: &runtime.Gate{}, HealthTimeout: 5 * time.Second, StopGrace: 2 * time.Second}
	if err := d.Init(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.StopAll)
	if d.uids == nil {
		t.Fatalf("Slipway is root but deployments get no uid of their own: %v", d.Isolation())
	}
	mark := fmt.Sprintf("slipway-leftover-%d", rand.Int64())
	var paths []string
	for _, dir := range sandbox.SharedTempDirs {
		paths = append(paths, filepath.Join(dir, mark))
	}
	t.Cleanup(func() {
		for _, p := range paths {
			os.Remove(p)
		}
	})
	write := specOf(t, "writer", `{}`)
	write.InstallCommand = "umask 077; for p in " + strings.Join(paths, " ") + `; do echo left-behind > "$p" && echo "wrote $p"; done; true`
	var log strings.Builder
	if _, err := d.Build(context.Background(), write, &syncWriter{w: &log}); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	t.Logf("writer: %s", log.String())
	if !strings.Contains(log.String(), "wrote ") {
		t.Fatalf("the writer could write no temporary file at all:\n%s", log.String())
	}
	if err := d.Remove(context.Background(), "writer"); err != nil {
		t.Fatal(err)
	}
	read := specOf(t, "reader", `{}`)
	read.InstallCommand = "for p in " + strings.Join(paths, " ") + `; do cat "$p" 2>/dev/null && echo "FOU""ND $p"; done; true`
	log.Reset()
	if _, err := d.Build(context.Background(), read, &syncWriter{w: &log}); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if got, _ := d.owner("reader"); got != uid {
		t.Fatalf("the reader got uid %d, not the freed %d: the test proves nothing", got, uid)
	}
	if strings.Contains(log.String(), "FOUND") || strings.Contains(log.String(), "left-behind") {
		t.Fatalf("the next deployment with the same uid read what the removed one left:\n%s", log.String())
	}
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is on the host after the deployment was removed", p)
		}
	}
}

// TestUIDsAreNotReusedSoon: the allocator moves on past a freed uid, comes
// back to it only when the range wraps, skips a uid that still owns
// something, and reads the old uids.json format.
func TestUIDsAreNotReusedSoon(t *testing.T) {
	dir := t.TempDir()
	busy := map[int]bool{}
	inUse := func(uid int) (bool, error) { return busy[uid], nil }
	tab, err := loadUIDs(filepath.Join(dir, "uids.json"), 100, 102, inUse)
	if err != nil {
		t.Fatal(err)
	}
	get := func(dep string) int {
		t.Helper()
		uid, err := tab.get(dep)
		if err != nil {
			t.Fatalf("%s: %v", dep, err)
		}
		return uid
	}
	steps := []struct {
		op, dep string
		want    int
	}{
		{"get", "a", 100}, {"get", "b", 101}, {"free", "a", 0},
		{"get", "c", 102}, // not the freed 100
		{"get", "d", 100}, // wrapped
		{"free", "b", 0}, {"free", "c", 0},
	}
	for _, s := range steps {
		if s.op == "free" {
			if err := tab.free(s.dep); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got := get(s.dep); got != s.want {
			t.Fatalf("%s got %d, want %d", s.dep, got, s.want)
		}
	}
	// 101 and 102 are free; 101 still owns a file: 102 it is, then none.
	busy[101] = true
	if got := get("e"); got != 102 {
		t.Fatalf("e got %d, want 102 (101 is in quarantine)", got)
	}
	if _, err := tab.get("f"); err == nil || !strings.Contains(err.Error(), "1 of them still own") {
		t.Fatalf("f: %v", err)
	}
	// The table survives a restart, where it left off.
	again, err := loadUIDs(filepath.Join(dir, "uids.json"), 100, 102, nil)
	if err != nil {
		t.Fatal(err)
	}
	if again.next != 103 || len(again.byID) != 2 {
		t.Fatalf("reloaded: next %d, %v", again.next, again.byID)
	}
	// The format before: the map alone; allocation goes on after its top.
	if err := os.WriteFile(filepath.Join(dir, "old.json"), []byte(`{"x": 100, "y": 101}`), 0o600); err != nil {
		t.Fatal(err)
	}
	old, err := loadUIDs(filepath.Join(dir, "old.json"), 100, 105, nil)
	if err != nil {
		t.Fatal(err)
	}
	if uid, err := old.get("z"); err != nil || uid != 102 {
		t.Fatalf("after the old format: %d, %v", uid, err)
	}
}
