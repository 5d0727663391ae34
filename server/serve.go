// Package server wires Slipway's `serve` process: the database, the
// organization and control-plane APIs, the runtime, and the HTTP listener.
package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"slipway/config"
	"slipway/server/orgapi"
	"slipway/storage"
)

// masterKey is the master key the configuration gives (SLIPWAY_MASTER_KEY,
// or the file SLIPWAY_MASTER_KEY_FILE names), or the one kept in the data
// directory, made on first start.
func masterKey(cfg config.Serve) ([]byte, error) {
	if cfg.MasterKey != "" {
		k, err := storage.ParseKey(cfg.MasterKey)
		if err != nil {
			return nil, fmt.Errorf("SLIPWAY_MASTER_KEY: %w", err)
		}
		return k, nil
	}
	return storage.LoadMasterKey(cfg.MasterKeyFile, cfg.DataDir)
}

// Serve runs the control plane until ctx ends, then shuts down gracefully:
// stop accepting, let in-flight requests finish, close the database. The
// control plane itself is New's; Serve adds the listeners and systemd.
func Serve(ctx context.Context, cfg config.Serve, log zerolog.Logger, version string) error {
	app, err := New(ctx, cfg, log, version)
	if err != nil {
		return err
	}
	defer app.Close()

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s (SLIPWAY_ADDR): %w", cfg.Addr, err)
	}
	srv := &http.Server{
		Handler:           app.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	// HTTP is served last: a server that answers on its port also has its
	// admin socket and token in place (what `slipway admin`, the tests and
	// systemd's READY=1 count on); New put them there.
	stopAgents, err := listenAgents(cfg, app.AgentsHandler(), log, srv.BaseContext)
	if err != nil {
		_ = ln.Close()
		return err
	}
	stopMetrics := func(context.Context) {}
	if h := app.MetricsHandler(); h != nil {
		var bound string
		stopMetrics, bound, err = listenMetrics(ctx, cfg.Metrics.Addr, h)
		if err != nil {
			_ = ln.Close()
			stopAgents(context.Background())
			return err
		}
		log.Info().Str("addr", bound).Msg("serving /metrics (bearer token required)")
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info().Str("addr", ln.Addr().String()).Str("public_url", cfg.PublicURL).Str("version", version).Msg("slipway serving")
	notifySystemd("READY=1")

	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	notifySystemd("STOPPING=1")
	log.Info().Msg("shutting down")
	shutCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn().Err(err).Msg("shutdown did not finish cleanly")
	}
	stopAgents(shutCtx)
	stopMetrics(shutCtx)
	return nil
}

// bootstrap creates the first organization and shows its key exactly once:
// in the log and in <data dir>/initial-api-key (0600).
func bootstrap(cfg config.Serve, orgs *orgapi.Store, log zerolog.Logger) error {
	key, err := orgs.Bootstrap(cfg.BootstrapAPIKey)
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	if key == "" {
		return nil
	}
	path := filepath.Join(cfg.DataDir, "initial-api-key")
	if cfg.BootstrapAPIKey == "" {
		if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		log.Info().Str("api_key", key).Str("file", path).
			Msg("created organization Default with an organization-admin API key; it is shown only this once")
	} else {
		log.Info().Msg("created organization Default with the key from SLIPWAY_BOOTSTRAP_API_KEY")
	}
	return nil
}

// notifySystemd speaks the sd_notify protocol (a datagram to
// $NOTIFY_SOCKET) so a Type=notify unit knows when Slipway serves.
func notifySystemd(state string) {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return
	}
	if addr[0] == '@' {
		addr = "\x00" + addr[1:]
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		return
	}
	defer conn.Close()
	_, _ = conn.Write([]byte(state))
}
