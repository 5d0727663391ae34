package process

import (
	"fmt"
	"os"
	"os/exec"
)

// The agent's token (runtime.AgentTokenHeader) reaches it on a pipe, not in
// its environment: a process's initial environment stays readable in
// /proc/<pid>/environ for its whole life (unsetting a variable changes
// only the process's own copy), so graph code, which runs as the agent's
// uid, could read it from its parent's, and every subprocess would
// inherit it. The pipe is the agent's fd 3 (the first of
// exec.Cmd.ExtraFiles, named in Job.KeepFDs so that the launcher keeps it
// open across its exec); the agent reads it once at start, before it runs
// any graph, and closes it (config.Agent.TokenFD).
const tokenFD = 3

// tokenEnv tells the agent where its token is.
const tokenEnv = "SLIPWAY_AGENT_TOKEN_FD=3"

// passToken gives cmd (not yet started) a pipe holding token as its fd 3.
// The write end is closed at once, so the agent reads to EOF; the token is
// far below a pipe's capacity, so the write never blocks.
func passToken(cmd *exec.Cmd, token string) error {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("agent token: %w", err)
	}
	_, err = w.WriteString(token)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return fmt.Errorf("agent token: %w", err)
	}
	cmd.ExtraFiles = []*os.File{r}
	return nil
}

// closePassed closes Slipway's copies of the files handed to a child once
// it has started (or failed to): they are the child's alone.
func closePassed(cmd *exec.Cmd) {
	if cmd == nil {
		return
	}
	for _, f := range cmd.ExtraFiles {
		f.Close()
	}
}
