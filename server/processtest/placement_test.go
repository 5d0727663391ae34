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
// `slipway serve` as a process, each for the reason given. Everything
// else starts the control plane in-process (apptest.New). They are the
// end-to-end suites still to move here: they share helpers and testdata
// with the server package's other tests.
var processStarters = map[string]string{
	// Agents on the process or docker runtime: the runtime runs the
	// slipway binary as the agent and as the sandbox launcher.
	"server/runtime_e2e_test.go":               "process/docker runtime",
	"server/runtime_docker_test.go":            "docker runtime",
	"server/runtime_instances_test.go":         "docker runtime",
	"server/runtime_containment_test.go":       "docker runtime",
	"server/runtime_python_test.go":            "process/docker runtime",
	"server/runtime_poetry_test.go":            "process/docker runtime",
	"server/runtime_health_test.go":            "process/docker runtime",
	"server/runtime_bench_test.go":             "process/docker runtime",
	"server/runtime_graph_bench_test.go":       "process/docker runtime",
	"server/runtime_python_bench_test.go":      "process/docker runtime",
	"server/containment_bench_test.go":         "process runtime",
	"server/sandbox_e2e_test.go":               "the sandbox: root and another user",
	"server/jsdeploy_test.go":                  "process runtime",
	"server/jsdeploy_docker_test.go":           "docker runtime",
	"server/langgraph_deploy_test.go":          "process runtime",
	"server/logs_follow_test.go":               "process/docker runtime",
	"server/revision_race_test.go":             "process runtime",
	"server/images_test.go":                    "docker runtime",
	"server/images_base_test.go":               "docker runtime",
	"server/corpus_test.go":                    "process/docker runtime",
	"server/soak_test.go":                      "process/docker runtime",
	"server/dashboard/browser_test.go":         "process runtime",
	"server/dashboard/cookies_browser_test.go": "process runtime",
	// A real agent process behind the proxy, driven by a browser.
	"server/proxy_ui_test.go":            "agent process",
	"server/ui_browser_test.go":          "agent process",
	"server/cors_browser_test.go":        "agent process",
	"server/docs_browser_test.go":        "agent process",
	"server/golden_test.go":              "a database an older binary wrote, opened by the binary",
	"server/bodylimit_test.go":           "the server process's memory (RSS)",
	"server/bench_test.go":               "process-level numbers for BENCHMARKS.md",
	"server/audit_bench_test.go":         "process-level numbers for BENCHMARKS.md",
	"server/cli/e2e_test.go":             "the CLI binary against a server, as users run it",
	"server/cli/logs_follow_e2e_test.go": "the CLI binary against a server, as users run it",
}

var startsProcess = regexp.MustCompile(`servertest\.(Start|StartAs|StartUnmanaged)\(`)

// TestOnlyProcessSuitesStartTheBinary: a test that only speaks HTTP uses
// the in-process control plane; only this folder and the suites listed in
// processStarters start `slipway serve` as a process.
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
