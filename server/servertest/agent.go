package servertest

import (
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// Agent is a running `slipway agent`.
type Agent struct {
	URL     string
	DataDir string
	Env     map[string]string
	cmd     *exec.Cmd
	logs    *syncBuffer
	t       testing.TB
}

// StartAgent runs `slipway agent` with env on a free loopback port and a
// fresh data directory unless env names one; it is stopped when the test ends.
func StartAgent(t testing.TB, env map[string]string) *Agent {
	t.Helper()
	a := &Agent{Env: map[string]string{}, t: t}
	for k, v := range env {
		a.Env[k] = v
	}
	if a.Env["SLIPWAY_AGENT_DATA_DIR"] == "" {
		a.Env["SLIPWAY_AGENT_DATA_DIR"] = t.TempDir()
	}
	if a.Env["SLIPWAY_AGENT_ADDR"] == "" {
		a.Env["SLIPWAY_AGENT_ADDR"] = FreeAddr(t)
	}
	a.DataDir = a.Env["SLIPWAY_AGENT_DATA_DIR"]
	a.URL = "http://" + a.Env["SLIPWAY_AGENT_ADDR"]
	a.start()
	t.Cleanup(a.Stop)
	return a
}

func (a *Agent) start() {
	t := a.t
	a.logs = &syncBuffer{}
	cmd := exec.Command(Binary(t), "agent")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range a.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = a.logs, a.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a.cmd = cmd
	checkAPI(a.URL)
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get(a.URL + "/ok")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("slipway agent did not start: %v\n%s", err, a.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Logs returns what the agent printed.
func (a *Agent) Logs() string { return a.logs.String() }

// Stop sends SIGTERM and waits.
func (a *Agent) Stop() {
	if a.cmd == nil {
		return
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = a.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = a.cmd.Process.Kill()
		<-done
	}
	a.cmd = nil
}

// Kill crashes the agent with SIGKILL.
func (a *Agent) Kill() {
	if a.cmd == nil {
		return
	}
	_ = a.cmd.Process.Kill()
	_ = a.cmd.Wait()
	a.cmd = nil
}

// Restart starts the agent again on the same data directory and address.
func (a *Agent) Restart() {
	a.Stop()
	a.start()
}

// Do sends one JSON request to the agent.
func (a *Agent) Do(method, path string, body any, headers ...string) *Response {
	a.t.Helper()
	return Do(a.t, method, a.URL+path, body, headers...)
}
