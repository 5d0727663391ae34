package server

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"

	"slipway/config"
	"slipway/server/httpx"
	"slipway/storage"
)

// App is a wired control plane: its database open, its first organization
// bootstrapped, its background work (reconciler, audit retention and
// forwarding) running and its admin socket listening in the data directory.
// `slipway serve` serves Handler on SLIPWAY_ADDR; tests serve it with
// httptest in their own process. Several Apps may live in one process, each
// on its own data directory.
type App struct {
	a       *app
	db      *bolt.DB
	handler http.Handler
	agents  http.Handler
	// ctx is the App's life: background work and every request the
	// handler serves end with it (log streams, held proxy bodies).
	ctx       context.Context
	cancel    context.CancelFunc
	stopAdmin func()
	// serving is read-held by each request in flight; Close takes it to
	// wait for them, after which requests are refused (a closed database
	// must not be reached).
	serving   sync.RWMutex
	closeOnce sync.Once
}

// closeGrace bounds how long Close waits for requests in flight, as
// `slipway serve` bounds its HTTP shutdown.
const closeGrace = 20 * time.Second

// New opens cfg.DataDir (creating it, and the master key unless cfg gives
// one), migrates the database and starts the control plane, whose
// background work and requests end when ctx does or at Close. log receives
// everything the control plane logs; version is reported by /info and
// stamped into audit events. The caller must Close the App.
func New(ctx context.Context, cfg config.Serve, log zerolog.Logger, version string) (_ *App, err error) {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", cfg.DataDir, err)
	}
	master, err := masterKey(cfg)
	if err != nil {
		return nil, err
	}
	sealer, err := storage.NewSealer(master)
	if err != nil {
		return nil, err
	}
	// The migrations seal the audit chains, with a key derived from the master key.
	db, err := storage.OpenKeyed(filepath.Join(cfg.DataDir, "slipway.db"), 3*time.Second, storage.ControlPlaneMigrations, sealer.Key)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			db.Close()
		}
	}()
	a, err := newApp(cfg, db, sealer, log, version)
	if err != nil {
		return nil, err
	}
	if err := bootstrap(cfg, a.orgs, log); err != nil {
		a.Close()
		return nil, err
	}
	x := &App{a: a, db: db}
	x.ctx, x.cancel = context.WithCancel(ctx)
	// The handler is built before background work starts: it wires the
	// dashboard and the agents origin the reconciler's routes read.
	x.handler = x.bound(httpx.Chain(a.Handler(), log))
	x.agents = x.bound(httpx.Chain(a.agents, log))
	a.Start(x.ctx)
	stopAdmin, err := a.adminServer().Listen(x.ctx, cfg.DataDir)
	if err != nil {
		x.cancel()
		a.Close()
		return nil, err
	}
	x.stopAdmin = stopAdmin
	return x, nil
}

// MetricsHandler serves /metrics (SLIPWAY_METRICS_ADDR, see metrics.go);
// nil when metrics are off.
func (x *App) MetricsHandler() http.Handler {
	if x.a.metrics == nil {
		return nil
	}
	return x.bound(x.a.metrics.handler())
}

// Handler is the whole HTTP surface of the control plane (SLIPWAY_ADDR).
func (x *App) Handler() http.Handler { return x.handler }

// AgentsHandler serves the agents' own origin (SLIPWAY_AGENTS_ADDR, see
// agents_origin.go).
func (x *App) AgentsHandler() http.Handler { return x.agents }

// Close ends the App's requests and background work, waits for them (at
// most closeGrace for requests), stops the agents the process runtime
// started, removes the admin socket and closes the database. It is safe to
// call more than once.
func (x *App) Close() error {
	var err error
	x.closeOnce.Do(func() {
		x.cancel()
		drained := make(chan struct{})
		go func() {
			x.serving.Lock() // never released: the App serves no more
			close(drained)
		}()
		select {
		case <-drained:
		case <-time.After(closeGrace):
			x.a.log.Warn().Msg("requests still in flight at close")
		}
		x.stopAdmin()
		x.a.Close()
		if cerr := x.db.Close(); cerr != nil {
			err = fmt.Errorf("close database: %w", cerr)
		}
	})
	return err
}

// bound ties each request to the App's life: its context ends when the App
// closes, and a request arriving after Close is refused.
func (x *App) bound(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !x.serving.TryRLock() {
			httpx.WriteJSON(w, http.StatusServiceUnavailable, map[string]any{"detail": "Slipway is shutting down."})
			return
		}
		defer x.serving.RUnlock()
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		stop := context.AfterFunc(x.ctx, cancel)
		defer stop()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}
