package process

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"slipway/runtime"
	"slipway/runtime/build/swaprace"
)

// raceSecret is what the files outside the tree hold; as an env file it
// is not valid (no '='), so a parser that read it would quote it.
const raceSecret = "6f1d2c3b4a5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8"

// outsideTree is a directory beside the revision, laid out like the
// project so that every link leads to a file that exists, and watched:
// touched lists every open, read or listing in it since the last call.
func outsideTree(t *testing.T, under string) (dir string, touched func() []string) {
	t.Helper()
	dir = filepath.Join(under, "outside")
	for _, name := range []string{"langgraph.json", "package.json", "conf/app.env", "pip/pip.conf", "dep/pyproject.toml", "dep/requirements.txt"} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(raceSecret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir, swaprace.Watch(t, dir)
}

// owners are the uids owning everything under dir.
func owners(t *testing.T, dir string) map[string]uint32 {
	t.Helper()
	out := map[string]uint32{}
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		out[p] = st.Sys().(*syscall.Stat_t).Uid
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBuildRacesSymlinkSwaps builds revisions while swaprace swaps every
// file the build opens in the new revision's tree (the graph
// configuration in a subdirectory, its env file, pip_config_file, a local
// dependency's pyproject.toml and requirements.txt, package.json) for a
// link to a directory outside that holds a file of the same name: as a
// serving revision could once the tree is handed to the deployment's uid,
// and, stronger than any deployment, back and forth from the moment the
// files are unpacked, while the build reads them. Nothing outside may be opened, read, listed or handed
// over, and no error or log line may hold what is there or Slipway's
// paths. Before the build read everything up front through a Tree, the
// swap after the handover made it parse the outside "env file" and quote
// it in its error.
func TestBuildRacesSymlinkSwaps(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("the sandbox tests run as root in CI")
		}
		t.Skip("skipping: the tree is handed to a deployment uid only when Slipway is root")
	}
	d := newDriver(t)
	if d.uids == nil {
		t.Skipf("skipping: the sandbox runs without uids here (%s)", d.isolation.Mode)
	}
	uid, err := d.owner("dep1")
	if err != nil {
		t.Fatal(err)
	}
	outside, touched := outsideTree(t, d.DataDir)
	before := owners(t, outside)
	touched() // the listing above
	project := func(padding int) map[string]string {
		cfg := `{"graphs": {"agent": {"builtin": "echo"}}, "env": "./conf/app.env", "pip_config_file": "pip/pip.conf",
		"dependencies": ["./dep"], "python_version": "3.99"` + strings.Repeat(" ", padding) + `}`
		return map[string]string{
			"cfg/langgraph.json": cfg, "cfg/conf/app.env": "FROM_THE_SOURCE=1\n", "cfg/pip/pip.conf": "[global]\n",
			"cfg/dep/pyproject.toml": "[project]\nname = \"dep\"\ndependencies = []\n", "cfg/dep/requirements.txt": "\n",
			"cfg/package.json": "{}",
		}
	}
	// Padding widens the window between the handover and the reads a
	// build made after it (parsing 4 MiB of JSON): the race is won by the
	// attacker every time where that window exists. Swapping back and
	// forth needs no window.
	padded, plain := project(4<<20), project(0)
	under := func(swap string) string { return filepath.Join(outside, filepath.FromSlash(swap)) }
	inCfg := []swaprace.Target{
		{File: "cfg/conf/app.env", Swap: "cfg/conf", To: under("conf")},
		{File: "cfg/pip/pip.conf", Swap: "cfg/pip", To: under("pip")},
		{File: "cfg/dep/pyproject.toml", Swap: "cfg/dep", To: under("dep")},
		{File: "cfg/package.json", Swap: "cfg/package.json", To: under("package.json")},
	}
	cfgDir := []swaprace.Target{{File: "cfg/langgraph.json", Swap: "cfg", To: outside}}
	toggle := swaprace.Options{Owner: -1, Files: true, Toggle: true, Interval: 50 * time.Microsecond}
	for i, tc := range []struct {
		name    string
		files   map[string]string
		targets []swaprace.Target
		opt     swaprace.Options
		builds  int
	}{
		{"after the handover, every file under the configuration's directory", padded, inCfg, swaprace.Options{Owner: uid}, 1},
		{"after the handover, the configuration's directory", padded, cfgDir, swaprace.Options{Owner: uid}, 1},
		{"before the handover, back and forth", plain, inCfg, toggle, 6},
		{"before the handover, the configuration's directory back and forth", plain, cfgDir, toggle, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for n := 0; n < tc.builds; n++ {
				rev := fmt.Sprintf("race%d-%d", i, n)
				s := runtime.Spec{DeploymentID: "dep1", RevisionID: rev, Source: "internal_source",
					TarballPath: tarball(t, t.TempDir(), tc.files), GraphConfig: "cfg/langgraph.json"}
				app := filepath.Join(d.revDir("dep1", rev), "app")
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan []swaprace.Result, 1)
				go func() {
					res, _ := swaprace.Race(ctx, app, tc.targets, tc.opt)
					done <- res
				}()
				var log bytes.Buffer
				_, err := d.Build(context.Background(), s, &log)
				// A hold-once attacker gets the chance to swap after the
				// build, too: what the build left behind is checked below.
				time.Sleep(20 * time.Millisecond)
				cancel()
				results := <-done
				swapped := 0
				for _, r := range results {
					swapped += r.Swaps
				}
				if tc.opt.Owner >= 0 && swapped == 0 {
					t.Fatalf("the race never swapped (%+v); build: %v", results, err)
				}
				if err == nil {
					t.Fatalf("the build passed; python_version 3.99 should fail it after the reads\n%s", log.String())
				}
				msg := err.Error() + "\n" + log.String()
				if strings.Contains(msg, raceSecret) {
					t.Errorf("the build read a file outside its tree: %s", err)
				}
				for _, p := range []string{d.DataDir, outside} {
					if strings.Contains(err.Error(), p) {
						t.Errorf("the error names %s: %s", p, err)
					}
				}
				if got := touched(); len(got) > 0 {
					t.Errorf("the build opened, read or listed outside its tree: %v (error: %v)", got, err)
				}
				if tc.opt.Owner >= 0 && !strings.Contains(err.Error(), "python_version 3.99") {
					// A swap after the handover is after every read: the
					// build goes on to the interpreter, as without a race.
					t.Errorf("the build failed before the interpreter check: %v", err)
				}
				t.Logf("swaps %d; build error: %v", swapped, err)
			}
			after := owners(t, outside)
			touched() // the listing above
			for p, u := range after {
				if before[p] != u {
					t.Errorf("%s, outside the tree, changed owner to %d", p, u)
				}
			}
		})
	}
}
