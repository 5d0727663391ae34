package js_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"slipway/server/servertest"
)

// TestJSHostMatchesReference runs diff/diff.test.mjs: the same calls
// through the official JS SDK against the reference JavaScript server
// (@langchain/langgraph-api run by `langgraphjs dev`) and against a real
// `slipway agent`, both serving testdata/graphs/js-agent/diff.json, and
// compares what a client sees; it fails on any difference that
// diff/allowlist.mjs (and the README) does not list.
func TestJSHostMatchesReference(t *testing.T) {
	project, _ := needNode(t)
	diffDir := filepath.Join(servertest.RepoRoot(), "runtime", "agent", "hosts", "js", "diff")
	if _, err := os.Stat(filepath.Join(diffDir, "node_modules", ".bin", "langgraphjs")); err != nil {
		msg := "`npm ci` in runtime/agent/hosts/js/diff is needed for the differential test against the reference server"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	config := filepath.Join(project, "diff.json")
	refURL := startReference(t, diffDir, project, config)
	a := servertest.StartAgent(t, map[string]string{"SLIPWAY_LOG_LEVEL": "warn", "SLIPWAY_GRAPH_CONFIG": config})

	cmd := exec.Command("node", "--test", "--test-reporter=spec", "--test-concurrency=1", "diff.test.mjs")
	cmd.Dir = diffDir
	cmd.Env = append(os.Environ(), "AGENT_URL="+a.URL, "REFERENCE_URL="+refURL, "DIFF_VERBOSE=1")
	out, err := cmd.CombinedOutput()
	t.Logf("node --test:\n%s", out)
	if err != nil {
		t.Fatalf("slipway differs from the reference server: %v\nagent log:\n%s", err, a.Logs())
	}
}

// startReference runs the reference development server on the project's
// graphs. It runs from a scratch directory that links the project's
// sources and node_modules, because the dev server writes its state
// (.langgraph_api) and a .gitignore beside its configuration.
func startReference(t *testing.T, diffDir, project, config string) string {
	t.Helper()
	scratch := t.TempDir()
	for _, name := range []string{"src", "node_modules", "package.json"} {
		if err := os.Symlink(filepath.Join(project, name), filepath.Join(scratch, name)); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(scratch, "langgraph.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := servertest.FreeAddr(t)
	port := addr[strings.LastIndex(addr, ":")+1:]
	var logs lockedBuffer
	cmd := exec.Command(filepath.Join(diffDir, "node_modules", ".bin", "langgraphjs"), "dev",
		"--port", port, "--host", "127.0.0.1", "--no-browser", "--config", filepath.Join(scratch, "langgraph.json"))
	cmd.Dir = diffDir
	cmd.Env = append(os.Environ(), "LANGSMITH_TRACING=false", "LANGCHAIN_TRACING_V2=false", "NO_COLOR=1")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	// The CLI forks the API server: its own process group ends with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the reference server: %v", err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-done
		}
	})
	url := fmt.Sprintf("http://127.0.0.1:%s", port)
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url + "/ok"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the reference server did not answer /ok within 90s:\n%s", logs.String())
	return ""
}

// lockedBuffer collects a process's output while the test may read it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
