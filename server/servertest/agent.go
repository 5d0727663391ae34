package servertest

import (
	"os/exec"
	"testing"
	"time"
)

// Agent is a running `slipway agent`.
type Agent struct {
	URL     string
	DataDir string
	Env     map[string]string
	cmd     *exec.Cmd
	logs    *SyncBuffer
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
	a.logs = &SyncBuffer{}
	a.cmd = launch(t, Binary(t), "agent", a.Env, nil, a.logs)
	checkAPI(a.URL)
	waitReady(t, a.cmd, a.URL, "slipway agent", a.logs)
}

// Logs returns what the agent printed.
func (a *Agent) Logs() string { return a.logs.String() }

// Stop sends SIGTERM and waits.
func (a *Agent) Stop() {
	terminate(a.cmd, 20*time.Second)
	a.cmd = nil
}

// Kill crashes the agent with SIGKILL.
func (a *Agent) Kill() {
	kill(a.cmd)
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
