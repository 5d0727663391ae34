package processtest_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"slipway/server/servertest"
)

// processStarters are the test files outside this folder that may start
// `slipway serve` as a process, each for the reason given. Everything else
// starts the control plane in-process (apptest.New) or lives here.
var processStarters = map[string]string{
	// Suites of their own packages, with their own helpers and testdata.
	"server/cli/e2e_test.go":                    "the CLI binary against a server, as users run it",
	"server/cli/logs_follow_e2e_test.go":        "the CLI binary against a server, as users run it",
	"server/dashboard/browser_test.go":          "the dashboard in a browser, deployments on the process runtime",
	"server/dashboard/cookies_browser_test.go":  "the dashboard in a browser, deployments on the process runtime",
	"server/dashboard/charts_browser_test.go":   "the dashboard in a browser, deployments on the process runtime",
	"server/dashboard/explorer_browser_test.go": "the dashboard in a browser, a Python project on the process runtime",
}

var startsProcess = regexp.MustCompile(`servertest\.(Start|StartAs|StartUnmanaged)\(`)

// TestOnlyProcessSuitesStartTheBinary: a test that only speaks HTTP uses
// the in-process control plane; only this folder (with corpus/, the real
// projects, a package of its own so that `go test ./...` runs its builds
// beside this package's suites) and the suites listed in processStarters
// start `slipway serve` as a process.
func TestOnlyProcessSuitesStartTheBinary(t *testing.T) {
	root := servertest.RepoRoot()
	got := processStartingFiles(t, root)
	var stray []string
	for _, f := range got {
		if strings.HasPrefix(f, "server/processtest/") {
			continue
		}
		if _, ok := processStarters[f]; !ok {
			stray = append(stray, f)
		}
	}
	if len(stray) > 0 {
		t.Errorf("these files start slipway as a process; use apptest.New, or move the test to server/processtest if it needs a real process:\n  %s",
			strings.Join(stray, "\n  "))
	}
	seen := map[string]bool{}
	for _, f := range got {
		seen[f] = true
	}
	for f := range processStarters {
		if !seen[f] {
			t.Errorf("%s is listed in processStarters but starts no process: remove it from the list", f)
		}
	}
}

// processStartingFiles lists the Go files under root (slash-separated,
// relative) that call servertest.Start, StartAs or StartUnmanaged.
func processStartingFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == "node_modules" || name == "testdata" || (strings.HasPrefix(name, ".") && path != root) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if startsProcess.Match(src) {
			rel, _ := filepath.Rel(root, path)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}
