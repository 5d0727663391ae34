package agentapi

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"slipway/config"
)

// takeToken settles cfg.Token before anything else runs: from the pipe
// SLIPWAY_AGENT_TOKEN_FD names (the process runtime's way, see
// runtime/process/token.go), read to EOF and closed, so that no graph or
// language host started later inherits it. The variables go from the
// environment graphs get.
//
// An agent holding a token also makes itself non-dumpable: graph code runs
// as its uid and could otherwise read the token from its memory
// (/proc/<pid>/mem, ptrace) or, for a token passed by hand, from
// /proc/<pid>/environ, which keeps the initial environment whatever the
// process unsets. Its children are dumpable again once they exec.
func takeToken(cfg *config.Agent) error {
	defer os.Unsetenv("SLIPWAY_AGENT_TOKEN")
	defer os.Unsetenv("SLIPWAY_AGENT_TOKEN_FD")
	if cfg.TokenFD == 0 && cfg.Token == "" {
		return nil
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("make the agent non-dumpable: %w", err)
	}
	if cfg.TokenFD == 0 {
		return nil
	}
	f := os.NewFile(uintptr(cfg.TokenFD), "agent-token")
	if f == nil {
		return fmt.Errorf("SLIPWAY_AGENT_TOKEN_FD: %d is not a file descriptor", cfg.TokenFD)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return fmt.Errorf("SLIPWAY_AGENT_TOKEN_FD: read the token: %w", err)
	}
	token := strings.TrimSpace(string(raw))
	if token == "" {
		return errors.New("SLIPWAY_AGENT_TOKEN_FD: the pipe held no token")
	}
	cfg.Token = token
	return nil
}
