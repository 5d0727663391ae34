package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain lets the test binary serve as the launcher (slipway itself in
// production).
func TestMain(m *testing.M) {
	if os.Getenv(SpecEnv) != "" {
		os.Exit(Main())
	}
	os.Exit(m.Run())
}

// TestModes runs a job that reads a secret of the data directory and a file
// of its own deployment in every mode this host can run, the fallbacks
// included: the secret is out of reach, its own file is not.
func TestModes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: the privileged modes need root")
	}
	if _, err := os.Stat("/bin/cat"); err != nil {
		t.Skip("skipping: no /bin/cat")
	}
	_, abi, _ := Probe(os.Args[0], "/", "/")
	for _, tc := range []struct {
		mode     Mode
		landlock bool // the mode relies on Landlock for the data directory
	}{
		{ModeNamespaces, false},
		{ModeUID, false},
		{ModeLandlock, true},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			if tc.landlock && abi == 0 {
				t.Skip("skipping: the kernel has no Landlock")
			}
			// 0711 parents, as the process runtime makes them.
			root := t.TempDir()
			data := filepath.Join(root, "data")
			dep := filepath.Join(data, "deployments", "d1")
			if err := os.MkdirAll(dep, 0o711); err != nil {
				t.Fatal(err)
			}
			for _, d := range []string{filepath.Dir(root), root, data, filepath.Join(data, "deployments")} {
				_ = os.Chmod(d, 0o711)
			}
			// World-readable on purpose: only the sandbox stands between.
			if err := os.WriteFile(filepath.Join(data, "master.key"), []byte("TOPSECRET\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dep, "own"), []byte("MINE\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			l := &Launcher{Bin: os.Args[0], Mode: tc.mode}
			cmd, err := l.Command(context.Background(), Job{DataDir: data, DeployDir: dep, UID: 200001, GID: 200001, Dir: dep,
				Argv: []string{"/bin/cat", filepath.Join(dep, "own"), filepath.Join(data, "master.key")}, Env: []string{"PATH=/usr/bin:/bin"}})
			if err != nil {
				t.Fatal(err)
			}
			out, _ := cmd.CombinedOutput()
			if !strings.Contains(string(out), "MINE") {
				t.Fatalf("the job could not read its own file:\n%s", out)
			}
			if strings.Contains(string(out), "TOPSECRET") {
				t.Fatalf("the job read the data directory:\n%s", out)
			}
			t.Logf("%s", out)
		})
	}
}
