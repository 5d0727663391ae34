package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRevisionSeesOnlyItself runs a job of revision A of a deployment
// while revision B's tree sits beside it, owned by the same uid (as when
// B is being built while A serves), in every mode this host can run. The
// job must not list, read or write B's tree, nor write the earlier
// revision's environment it shares read-only; in a mount namespace B
// does not even exist for it. Its own files it reads and writes. Before
// jobs named what they see, the whole deployment directory was bound (or,
// under Landlock, writable) and every attempt here succeeded.
func TestRevisionSeesOnlyItself(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: the privileged modes need root")
	}
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("skipping: no /bin/sh")
	}
	_, abi, _ := Probe(os.Args[0], "/", "/")
	const uid = 200002
	for _, tc := range []struct {
		mode      Mode
		namespace bool // B must not exist at all
		landlock  bool // only Landlock keeps B out
	}{
		{ModeNamespaces, true, false},
		{ModeUserNamespaces, true, true},
		{ModeUID, false, true},
		{ModeLandlock, false, true},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			if tc.landlock && abi == 0 && !tc.namespace {
				t.Skip("skipping: the kernel has no Landlock, which is all that keeps revisions apart in this mode")
			}
			root := t.TempDir()
			data := filepath.Join(root, "data")
			dep := filepath.Join(data, "deployments", "d1")
			revs := filepath.Join(dep, "revisions")
			a, b, c := filepath.Join(revs, "rev-a"), filepath.Join(revs, "rev-b"), filepath.Join(revs, "rev-c")
			files := map[string]string{
				filepath.Join(a, "app", "own.txt"):        "MINE\n",
				filepath.Join(b, "app", "secret.txt"):     "NEXT-REVISION-CODE\n",
				filepath.Join(c, "venv", "lib", "pkg.py"): "SHARED\n",
				filepath.Join(dep, "home", ".keep"):       "",
				filepath.Join(dep, "tmp", ".keep"):        "",
				filepath.Join(dep, "agent-data", "db"):    "",
			}
			for p, body := range files {
				if err := os.MkdirAll(filepath.Dir(p), 0o711); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for _, d := range []string{filepath.Dir(root), root, data, filepath.Dir(dep), dep, revs, a, b, c} {
				if err := os.Chmod(d, 0o711); err != nil {
					t.Fatal(err)
				}
			}
			// The deployment's trees are its uid's (Slipway's own where
			// deployments share it), B's included: file permissions do not
			// keep A out, only the sandbox does.
			owner := uid
			if !tc.mode.Privileged() {
				owner = os.Getuid()
			}
			for _, d := range []string{filepath.Join(a, "app"), filepath.Join(b, "app"), filepath.Join(c, "venv"), filepath.Join(dep, "home"), filepath.Join(dep, "tmp"), filepath.Join(dep, "agent-data")} {
				if err := filepath.Walk(d, func(p string, _ os.FileInfo, err error) error {
					if err != nil {
						return err
					}
					if err := os.Chmod(p, 0o755); err != nil {
						return err
					}
					return os.Lchown(p, owner, owner)
				}); err != nil {
					t.Fatal(err)
				}
			}
			script := `
try() { label=$1; shift; if "$@" >/dev/null 2>&1; then echo "$label=allowed"; else echo "$label=denied"; fi; }
try own-read cat "$A/app/own.txt"
try own-write touch "$A/app/new.txt"
try home-write touch "$HOME/new.txt"
try shared-read cat "$C/venv/lib/pkg.py"
try shared-write touch "$C/venv/lib/planted.py"
try next-stat stat "$B/app"
try next-list ls "$B/app"
try next-read cat "$B/app/secret.txt"
try next-write touch "$B/app/planted.py"
try next-swap mv "$B/app/secret.txt" "$B/app/moved.txt"
try agent-data ls "$D/agent-data"
echo "revisions=$(ls "$R" 2>/dev/null | tr '\n' ' ')"
`
			l := &Launcher{Bin: os.Args[0], Mode: tc.mode}
			job := Job{DataDir: data, DeployDir: dep, UID: uid, GID: uid, Dir: filepath.Join(a, "app"),
				Binds: []Bind{
					{Path: filepath.Join(dep, "home")}, {Path: filepath.Join(dep, "tmp")},
					{Path: filepath.Join(a, "app")}, {Path: filepath.Join(c, "venv"), ReadOnly: true},
				},
				Argv: []string{"/bin/sh", "-c", script},
				Env: []string{"PATH=/usr/bin:/bin", "HOME=" + filepath.Join(dep, "home"), "A=" + a, "B=" + b, "C=" + c,
					"D=" + dep, "R=" + revs}}
			cmd, err := l.Command(context.Background(), job)
			if err != nil {
				t.Fatal(err)
			}
			out, err := cmd.CombinedOutput()
			if tc.mode == ModeUserNamespaces && err != nil && strings.Contains(string(out), "slipway sandbox") {
				t.Skipf("skipping: user namespaces do not work here: %s", out)
			}
			got := map[string]string{}
			for _, line := range strings.Split(string(out), "\n") {
				if k, v, ok := strings.Cut(line, "="); ok {
					got[k] = v
				}
			}
			want := map[string]string{
				"own-read": "allowed", "own-write": "allowed", "home-write": "allowed", "shared-read": "allowed",
				"shared-write": "denied", "next-list": "denied", "next-read": "denied", "next-write": "denied",
				"next-swap": "denied", "agent-data": "denied",
			}
			if tc.namespace {
				// Not there at all. Under Landlock alone a name can still
				// be stat'ed (Landlock does not cover stat), see SECURITY.md.
				want["next-stat"] = "denied"
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s: %q, want %s", k, got[k], v)
				}
			}
			if strings.Contains(got["revisions"], "rev-b") {
				t.Errorf("the job lists revision B: %q", got["revisions"])
			}
			if raw, err := os.ReadFile(filepath.Join(b, "app", "secret.txt")); err != nil || string(raw) != "NEXT-REVISION-CODE\n" {
				t.Errorf("revision B's file after the job: %q, %v", raw, err)
			}
			if _, err := os.Stat(filepath.Join(b, "app", "planted.py")); err == nil {
				t.Error("the job wrote into revision B")
			}
			t.Logf("%s", out)
		})
	}
}
