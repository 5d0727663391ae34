package swarm

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"slipway/runtime"
)

// TaskSubcommand is `slipway swarm-task`, what a swarm service runs in an
// image Slipway built (whose entrypoint is /slipway agent):
//
//	slipway swarm-task run     load the secrets, then become the agent
//	slipway swarm-task probe   the service's health check: GET /ok
const TaskSubcommand = "swarm-task"

// secretsDir is where Swarm mounts a service's secrets.
const secretsDir = "/run/secrets"

// TaskMain runs `slipway swarm-task`.
func TaskMain(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: slipway swarm-task run|probe")
		return 2
	}
	switch args[0] {
	case "run":
		env, err := secretEnv(secretsDir, os.Environ())
		if err != nil {
			fmt.Fprintln(os.Stderr, "slipway swarm-task:", err)
			return 1
		}
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintln(os.Stderr, "slipway swarm-task:", err)
			return 1
		}
		err = syscall.Exec(self, []string{self, "agent"}, env)
		fmt.Fprintln(os.Stderr, "slipway swarm-task: exec the agent:", err)
		return 1
	case "probe":
		return probe(os.Getenv("SLIPWAY_AGENT_ADDR"), os.Getenv("SLIPWAY_AGENT_TOKEN"))
	}
	fmt.Fprintln(os.Stderr, "usage: slipway swarm-task run|probe")
	return 2
}

// secretEnv is env with the secrets mounted in dir as env.<NAME> (the
// revision's own, exact) and ref.<NAME> (referenced) added:
// Swarm gives a service its secrets as files only, the agent reads its
// secrets from its environment. Slipway's own settings (SLIPWAY_AGENT_*,
// already in env) win over a secret of the same name, as runtime.Settle
// makes them on the other runtimes.
func secretEnv(dir string, env []string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return env, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the secrets: %w", err)
	}
	var secrets []string
	for _, e := range entries {
		name, own := strings.CutPrefix(e.Name(), envSecretPrefix)
		name, ref := strings.CutPrefix(name, refSecretPrefix)
		if !own && !ref || name == "" {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read secret %s: %w", name, err)
		}
		v := string(raw)
		if ref {
			v = strings.TrimRight(v, "\n")
		}
		secrets = append(secrets, name+"="+v)
	}
	var own []string
	for _, kv := range env {
		if strings.HasPrefix(kv, "SLIPWAY_AGENT_") {
			own = append(own, kv)
		}
	}
	return runtime.Settle(runtime.Settle(env, secrets), own), nil
}

// probe asks the agent in this container for GET /ok.
func probe(addr, token string) int {
	port := "8000"
	if _, p, err := net.SplitHostPort(addr); err == nil && p != "" {
		port = p
	}
	req, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:"+port+"/ok", nil)
	if err != nil {
		return 1
	}
	if token != "" {
		req.Header.Set(runtime.AgentTokenHeader, token)
	}
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "GET /ok:", err)
		return 1
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintln(os.Stderr, "GET /ok:", resp.Status)
		return 1
	}
	return 0
}
