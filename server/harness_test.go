package server

import (
	"context"
	"testing"

	"github.com/rs/zerolog"

	"slipway/config"
	"slipway/server/servertest"
)

// startApp is apptest.New for this package's own (internal) tests, which
// cannot import apptest: it imports this package.
func startApp(t testing.TB, env map[string]string) *servertest.Server {
	t.Helper()
	return servertest.StartWith(t, env, servertest.ServeFactory(func(cfg config.Serve, log zerolog.Logger) (servertest.App, error) {
		return New(context.Background(), cfg, log, "dev")
	}))
}
