package server

import (
	"context"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"

	"slipway/config"
	"slipway/runtime"
	"slipway/runtime/fake"
	"slipway/server/audit"
	"slipway/server/controlplane"
	"slipway/server/httpx"
	"slipway/server/orgapi"
	"slipway/storage"
)

// app is the wired `serve` process.
type app struct {
	cfg     config.Serve
	log     zerolog.Logger
	version string
	orgs    *orgapi.Store
	cp      *controlplane.Service
	driver  runtime.Driver
	why     string // why this driver was chosen, for /info and the log
	audit   *audit.Recorder
}

func newApp(cfg config.Serve, db *bolt.DB, sealer *storage.Sealer, log zerolog.Logger, version string) (*app, error) {
	a := &app{cfg: cfg, log: log, version: version}
	a.driver, a.why = chooseDriver(cfg)
	log.Info().Str("runtime", a.driver.Name()).Str("reason", a.why).Msg("runtime driver chosen")
	writer := &storage.Committer{DB: db}
	rec := &audit.Recorder{
		Log:     &audit.Log{Key: sealer.Key("slipway audit chain v1"), Version: version},
		Update:  writer.Update,
		Trusted: cfg.Prefixes(),
	}
	a.audit = rec
	a.orgs = &orgapi.Store{DB: db, Writer: writer, Audit: rec, DefaultAuditLogs: cfg.DefaultOrgAuditLogs}
	a.cp = &controlplane.Service{DB: db, Sealer: sealer, Driver: a.driver, PublicURL: cfg.PublicURL,
		DataDir: cfg.DataDir, MaxUpload: int64(cfg.MaxUploadMB) << 20, Log: log, Writer: writer, Audit: rec}
	return a, nil
}

// chooseDriver picks the runtime. Only the fake test driver exists so far;
// the docker and process drivers plug in here.
func chooseDriver(cfg config.Serve) (runtime.Driver, string) {
	switch cfg.Runtime {
	case "fake":
		return fake.New(50 * time.Millisecond), "SLIPWAY_RUNTIME=fake (test driver: runs nothing)"
	default:
		return unavailable{name: cfg.Runtime}, "no runtime driver is available in this build yet"
	}
}

// Start begins background work (the reconciler) bound to ctx.
func (a *app) Start(ctx context.Context) { a.cp.Start(ctx) }

// Close waits for background work to stop.
func (a *app) Close() { a.cp.Wait() }

// Handler is the whole HTTP surface of `serve`.
func (a *app) Handler() http.Handler {
	rt := httpx.NewRouter()
	for _, prefix := range []string{"", "/api-host"} {
		a.orgs.Routes(rt, prefix)
		a.cp.Routes(rt, a.orgs, prefix)
		rt.GET(prefix+"/ok", a.ok)
		rt.GET(prefix+"/info", a.info)
	}
	rt.PanicHandler = func(w http.ResponseWriter, r *http.Request, v any) {
		httpx.LogFrom(r).Error().Interface("panic", v).Msg("handler panic")
		httpx.WriteJSON(w, http.StatusInternalServerError, map[string]any{"detail": "Internal server error."})
	}
	// API bodies are small; uploads stream through their own cap.
	return limitNonUpload(rt, 1<<20)
}

func limitNonUpload(h http.Handler, max int64) http.Handler {
	limited := httpx.LimitBody(h, max)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			h.ServeHTTP(w, r)
			return
		}
		limited.ServeHTTP(w, r)
	})
}

func (a *app) ok(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"ok": true})
}

func (a *app) info(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"version": a.version,
		"runtime": map[string]any{"driver": a.driver.Name(), "reason": a.why},
	})
}
