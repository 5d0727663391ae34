// Command slipway is the whole appliance in one binary:
//
//	slipway serve     control plane, organization API, runtime drivers, proxy (default)
//	slipway agent     one deployment's agent server
//	slipway admin     host administration of the running server (admin socket)
//	slipway version   print the version
//
// and the client commands (package server/cli) that talk to a running
// server over HTTP: deploy, ls, status, revisions, logs, rollback, rm,
// secrets, keys, login;
//
// and one internal subcommand, never run by hand: `slipway
// internal-sandbox-exec` is the launcher through which the process runtime
// starts deployment code (package runtime/sandbox).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"slipway/config"
	"slipway/runtime/agent/agentapi"
	"slipway/runtime/sandbox"
	"slipway/runtime/swarm"
	"slipway/server"
	"slipway/server/admin"
	"slipway/server/cli"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	cmd := "serve"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	switch cmd {
	case sandbox.Subcommand:
		return sandbox.Main()
	case swarm.TaskSubcommand: // in a swarm service's container (runtime/swarm)
		return swarm.TaskMain(args)
	case "version", "--version", "-v":
		fmt.Println("slipway", version)
		return 0
	case "serve":
		cfg, err := config.LoadServe(nil)
		if err != nil {
			return configError(err)
		}
		return exitCode(server.Serve(ctx, cfg, newLogger(cfg.LogLevel, cfg.LogFormat), version))
	case "agent":
		cfg, err := config.LoadAgent(nil)
		if err != nil {
			return configError(err)
		}
		return exitCode(agentapi.Run(ctx, cfg, newLogger(cfg.LogLevel, cfg.LogFormat), version))
	case "admin":
		cfg, err := config.LoadAdmin(nil)
		if err != nil {
			return configError(err)
		}
		return admin.Main(args, cfg.DataDir, os.Stdout, os.Stderr)
	case "images":
		cfg, err := config.LoadImages(nil)
		if err != nil {
			return configError(err)
		}
		return server.ImagesMain(ctx, cfg, args, os.Stdout, os.Stderr)
	case "help", "--help", "-h":
		usage()
		return 0
	default:
		if cli.IsCommand(cmd) {
			return cli.Main(ctx, cmd, args, cli.OSEnv())
		}
		fmt.Fprintf(os.Stderr, "slipway: unknown command %q\n", cmd)
		usage()
		return 2
	}
}

func usage() {
	fmt.Fprint(os.Stderr, `usage: slipway [command]

server commands:
  serve     run the control plane, organization API and runtime (default)
  agent     run one deployment's agent server
  admin     administer the running server: organizations, audit log (slipway admin help)
  images    build or prune the docker runtime's agent images (slipway images build, slipway images prune)
  version   print the version

client commands (slipway COMMAND -h for their flags):
`)
	for _, c := range cli.Commands {
		fmt.Fprintf(os.Stderr, "  %-9s %s\n", c.Name, c.Summary)
	}
	fmt.Fprintf(os.Stderr, `
The client commands talk to --url / SLIPWAY_URL (default %s) with
--api-key / SLIPWAY_API_KEY; slipway login stores both. Exit codes: 0 done,
1 the revision failed or the server failed, 2 bad usage or local input,
3 server unreachable, 4 credentials or permission refused, 5 not found,
6 request refused (400, 409, 413, 422, 429).

Server configuration comes from environment variables; see the README.
`, cli.DefaultURL)
}

func configError(err error) int {
	fmt.Fprintln(os.Stderr, "slipway: configuration:", err)
	return 2
}

func exitCode(err error) int {
	if err == nil || errors.Is(err, context.Canceled) {
		return 0
	}
	fmt.Fprintln(os.Stderr, "slipway:", err)
	return 1
}

func newLogger(level, format string) zerolog.Logger {
	zerolog.TimeFieldFormat = time.RFC3339Nano
	lvl, err := zerolog.ParseLevel(level)
	if err != nil {
		lvl = zerolog.InfoLevel
	}
	var l zerolog.Logger
	if format == "console" {
		l = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: time.RFC3339})
	} else {
		l = zerolog.New(os.Stderr)
	}
	return l.Level(lvl).With().Timestamp().Logger()
}
