package sandbox

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sandboxedDirs makes a data directory with a deployment directory in it,
// with 0711 parents as the process runtime makes them.
func sandboxedDirs(t *testing.T) (data, dep string) {
	t.Helper()
	root := t.TempDir()
	data = filepath.Join(root, "data")
	dep = filepath.Join(data, "deployments", "d1")
	if err := os.MkdirAll(dep, 0o711); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Dir(root), root, data, filepath.Join(data, "deployments")} {
		_ = os.Chmod(d, 0o711)
	}
	return data, dep
}

// TestPrivateTempDirs: a job writes a file into /tmp, /var/tmp, /run/lock
// and /dev/shm. With a mount namespace each is its own, and nothing
// reaches the host; without one Landlock refuses the first three, and only
// /dev/shm (which POSIX shared memory needs) is the host's.
func TestPrivateTempDirs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: the privileged modes need root")
	}
	_, abi, _ := Probe(os.Args[0], "/", "/")
	mark := fmt.Sprintf("slipway-tmp-test-%d", rand.Int64())
	var paths []string
	for _, dir := range SharedTempDirs {
		if _, err := os.Stat(dir); err == nil {
			paths = append(paths, filepath.Join(dir, mark))
		}
	}
	t.Cleanup(func() {
		for _, p := range paths {
			os.Remove(p)
		}
	})
	for _, tc := range []struct {
		mode     Mode
		private  bool // a mount namespace
		landlock bool
	}{
		{ModeNamespaces, true, false},
		{ModeUID, false, true},
		{ModeLandlock, false, true},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			if tc.landlock && abi == 0 {
				t.Skip("skipping: the kernel has no Landlock")
			}
			data, dep := sandboxedDirs(t)
			l := &Launcher{Bin: os.Args[0], Mode: tc.mode}
			script := "for p in " + strings.Join(paths, " ") + `; do if echo x > "$p" 2>/dev/null; then echo "wrote $p"; else echo "denied $p"; fi; done`
			cmd, err := l.Command(context.Background(), Job{DataDir: data, DeployDir: dep, UID: 200001, GID: 200001, Dir: dep,
				Argv: []string{"/bin/sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin"}})
			if err != nil {
				t.Fatal(err)
			}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			t.Logf("%s", out)
			for _, p := range paths {
				shm := strings.HasPrefix(p, "/dev/shm/")
				wrote := strings.Contains(string(out), "wrote "+p)
				switch {
				case tc.private && !wrote:
					t.Errorf("the job could not write its private %s", filepath.Dir(p))
				case !tc.private && !shm && wrote:
					t.Errorf("the job wrote the host's %s", filepath.Dir(p))
				}
				_, err := os.Lstat(p)
				if onHost := err == nil; onHost && !(shm && !tc.private) {
					t.Errorf("%s reached the host", p)
				}
				os.Remove(p)
			}
		})
	}
}

// TestKeptFDs: a pipe the job names crosses into it; another descriptor
// its caller passed does not; a named descriptor that is not a pipe, or
// that was not passed, stops the launch.
func TestKeptFDs(t *testing.T) {
	data, dep := sandboxedDirs(t)
	mode, _, _ := Probe(os.Args[0], data, dep)
	l := &Launcher{Bin: os.Args[0], Mode: mode}
	secret, err := os.Open(os.Args[0]) // any file the job must not get
	if err != nil {
		t.Fatal(err)
	}
	defer secret.Close()
	run := func(keep []int, files ...*os.File) (string, error) {
		cmd, err := l.Command(context.Background(), Job{DataDir: data, DeployDir: dep, UID: 200001, GID: 200001, Dir: dep, KeepFDs: keep,
			Argv: []string{"/bin/sh", "-c", `cat <&3; if { true >&4; } 2>/dev/null; then echo " fd4-open"; else echo " fd4-closed"; fi`},
			Env:  []string{"PATH=/usr/bin:/bin"}})
		if err != nil {
			t.Fatal(err)
		}
		cmd.ExtraFiles = files
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	pipe := func() *os.File {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.WriteString("through-the-pipe")
		w.Close()
		t.Cleanup(func() { r.Close() })
		return r
	}
	out, err := run([]int{3}, pipe(), secret)
	if err != nil || !strings.Contains(out, "through-the-pipe fd4-closed") {
		t.Fatalf("kept pipe: %v: %q", err, out)
	}
	for _, tc := range []struct {
		name  string
		keep  []int
		files []*os.File
		want  string
	}{
		{"a file, not a pipe", []int{3}, []*os.File{secret}, "is not a pipe"},
		// High: the Go runtime of the launcher holds low descriptors of
		// its own (cgroup files), which are no pipes either.
		{"not passed", []int{200}, []*os.File{pipe()}, "was not passed"},
		{"stdout", []int{1}, nil, "always kept"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(tc.keep, tc.files...)
			if err == nil || !strings.Contains(out, tc.want) {
				t.Fatalf("%v: %q, want %q", err, out, tc.want)
			}
		})
	}
}

// TestPurgeOwned: a removed deployment's entries go from a shared
// directory, through no link; another owner's stay, and a file of the uid
// inside them keeps the uid in quarantine.
func TestPurgeOwned(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root to give files to other uids")
	}
	const uid, other = 200123, 200124
	base, outside := t.TempDir(), t.TempDir()
	target := filepath.Join(outside, "precious")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(target, []byte("keep"), 0o600))
	must(os.WriteFile(filepath.Join(base, "a"), nil, 0o600))
	must(os.MkdirAll(filepath.Join(base, "b", "deep"), 0o700))
	must(os.WriteFile(filepath.Join(base, "b", "deep", "f"), nil, 0o600))
	must(os.WriteFile(filepath.Join(base, "c"), nil, 0o600))
	must(os.MkdirAll(filepath.Join(base, "d"), 0o777))
	must(os.WriteFile(filepath.Join(base, "d", "nested"), nil, 0o600))
	must(os.Symlink(outside, filepath.Join(base, "link")))
	for _, p := range []string{"a", "b", "b/deep", "b/deep/f", "d/nested", "link"} {
		must(os.Lchown(filepath.Join(base, p), uid, uid))
	}
	must(os.Chown(filepath.Join(base, "c"), other, other))
	if err := PurgeOwned([]string{base, filepath.Join(base, "missing")}, uid); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{"a": false, "b": false, "link": false, "c": true, "d": true, "d/nested": true} {
		if _, err := os.Lstat(filepath.Join(base, p)); (err == nil) != want {
			t.Errorf("%s: there %v, want %v", p, err == nil, want)
		}
	}
	if _, err := os.Stat(target); err != nil {
		t.Fatalf("the link's target went: %v", err)
	}
	if busy, err := OwnsFiles([]string{base}, uid); err != nil || !busy {
		t.Fatalf("a file of the uid is left in another's directory, yet OwnsFiles = %v, %v", busy, err)
	}
	if busy, err := OwnsFiles([]string{base}, 200125); err != nil || busy {
		t.Fatalf("a uid that owns nothing: OwnsFiles = %v, %v", busy, err)
	}
}
