package processtest_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"slipway/server/servertest"
)

func TestSecondServerOnSameDataDirFailsFast(t *testing.T) {
	s := servertest.Start(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, servertest.Binary(t), "serve")
	cmd.Env = []string{"SLIPWAY_DATA_DIR=" + s.DataDir, "SLIPWAY_ADDR=" + servertest.FreeAddr(t)}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("second server: err %v after %v\n%s", err, time.Since(start), out)
	}
	if !strings.Contains(string(out), "data directory") || !strings.Contains(string(out), "in use") {
		t.Fatalf("message does not say the data directory is in use:\n%s", out)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("took %v to fail", time.Since(start))
	}
}

func TestBadConfigurationExitsWithStatus2(t *testing.T) {
	cases := []struct{ env, name string }{
		{"SLIPWAY_MAX_UPLOAD_MB=lots", "SLIPWAY_MAX_UPLOAD_MB"},
		{"SLIPWAY_ADDR=nowhere", "SLIPWAY_ADDR"},
		{"SLIPWAY_LOG_FORMAT=xml", "SLIPWAY_LOG_FORMAT"},
		{"SLIPWAY_MASTER_KEY=short", "SLIPWAY_MASTER_KEY"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(servertest.Binary(t), "serve")
			cmd.Env = []string{tc.env, "SLIPWAY_DATA_DIR=" + t.TempDir(), "SLIPWAY_ADDR=" + servertest.FreeAddr(t)}
			if strings.HasPrefix(tc.env, "SLIPWAY_ADDR") {
				cmd.Env = []string{tc.env, "SLIPWAY_DATA_DIR=" + t.TempDir()}
			}
			out, err := cmd.CombinedOutput()
			code := -1
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			if !strings.Contains(string(out), tc.name) {
				t.Fatalf("exit %d, output does not name %s:\n%s", code, tc.name, out)
			}
			if code != 2 {
				t.Fatalf("exit %d, want 2:\n%s", code, out)
			}
		})
	}
}

// TestGracefulShutdown: SIGTERM lets an in-flight request finish before the
// process exits, and the process exits 0.
func TestGracefulShutdown(t *testing.T) {
	s := servertest.Start(t, nil)
	id := s.Do("POST", "/v2/deployments", map[string]any{"name": "drain", "source": "internal_source", "source_config": map[string]any{},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}, "secrets": []any{}}).Map()["id"].(string)
	up := s.Do("POST", "/v2/deployments/"+id+"/upload-url", nil).Map()
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("PUT", up["upload_url"].(string), pr)
	done := make(chan int, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- -1
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	archive := tarGz(t)
	_, _ = pw.Write(archive[:10]) // the request is now in flight
	time.Sleep(200 * time.Millisecond)
	if err := syscall.Kill(s.PID(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	_, _ = pw.Write(archive[10:])
	pw.Close()
	if code := <-done; code != 200 {
		t.Fatalf("in-flight upload ended %d", code)
	}
	s.Stop()
	if !strings.Contains(s.Logs(), "shutting down") {
		t.Fatalf("no shutdown in log:\n%s", s.Logs())
	}
}

func tarGz(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	cmd := exec.Command("sh", "-c", "d=$(mktemp -d) && echo '{}' > $d/langgraph.json && tar -C $d -czf - langgraph.json")
	cmd.Stdout = &buf
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestVersionCommand(t *testing.T) {
	out, err := exec.Command(servertest.Binary(t), "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "slipway ") {
		t.Fatalf("%v: %s", err, out)
	}
}
