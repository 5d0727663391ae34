// Package apptest starts Slipway's control plane inside the test's own
// process, as coderdtest.New (coder/coder) does: server.New behind an
// httptest server, shaped as the servertest.Server the HTTP suites use. A
// test that needs no real process starts here in milliseconds; one that
// does (signals, crashes, the sandbox, docker) uses servertest.Start.
package apptest

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/rs/zerolog"

	"slipway/config"
	"slipway/server"
	"slipway/server/servertest"
)

// New starts a control plane configured by env (SLIPWAY_* variables, as
// `slipway serve` reads them; a fresh data directory and the fake runtime
// unless env says otherwise). It is closed when the test ends.
func New(t testing.TB, env map[string]string) *servertest.Server {
	t.Helper()
	return servertest.StartWith(t, env, Factory)
}

// NewUnmanaged is New for servers that outlive one test (benchmarks): the
// caller stops it and removes its data directory.
func NewUnmanaged(t testing.TB, env map[string]string) *servertest.Server {
	t.Helper()
	return servertest.StartUnmanagedWith(t, env, Factory)
}

// Factory builds the App for env, logging as `slipway serve` does (JSON
// lines at SLIPWAY_LOG_LEVEL) to logs.
func Factory(env map[string]string, logs io.Writer) (servertest.App, error) {
	cfg, err := config.LoadServe(env)
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	lvl, err := zerolog.ParseLevel(cfg.LogLevel)
	if err != nil {
		lvl = zerolog.InfoLevel
	}
	log := zerolog.New(logs).Level(lvl).With().Timestamp().Logger()
	return server.New(context.Background(), cfg, log, "dev") // what an unstamped build reports
}
