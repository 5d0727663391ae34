package servertest

import (
	"fmt"
	"net/http"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// StartReference starts cmd, a reference server (`langgraph dev`,
// `langgraphjs dev`) listening on 127.0.0.1:port, and returns its URL once
// /ok answers 200 or fails the test after within. The command runs in its
// own process group, because the development CLIs fork the API server;
// the group is stopped when the test ends (SIGTERM, then SIGKILL after
// 10 s) and the server's output is logged if the test failed.
func StartReference(t testing.TB, c *exec.Cmd, port string, within time.Duration) string {
	t.Helper()
	logs := &SyncBuffer{}
	c.Stdout, c.Stderr = logs, logs
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		t.Fatalf("start the reference server: %v", err)
	}
	pgid := c.Process.Pid
	t.Cleanup(func() {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("reference server log:\n%s", logs.String())
		}
	})
	url := fmt.Sprintf("http://127.0.0.1:%s", port)
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url + "/ok"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the reference server did not answer /ok within %s:\n%s", within, logs.String())
	return ""
}
