// Package apptest starts Slipway's control plane inside the test's own
// process, as coderdtest.New (coder/coder) does: server.New behind an
// httptest server, shaped as the servertest.Server the HTTP suites use. A
// test that needs no real process starts here in milliseconds; one that
// does (signals, crashes, the sandbox, docker) uses servertest.Start.
package apptest

import (
	"context"
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

// Factory builds the App for env with server.New, logging as `slipway
// serve` does to logs.
var Factory = servertest.ServeFactory(func(cfg config.Serve, log zerolog.Logger) (servertest.App, error) {
	return server.New(context.Background(), cfg, log, "dev") // what an unstamped build reports
})
