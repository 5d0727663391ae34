package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"

	"slipway/config"
	"slipway/oteltrace"
	"slipway/runtime"
	"slipway/runtime/docker"
	"slipway/runtime/fake"
	"slipway/runtime/process"
	"slipway/runtime/swarm"
	"slipway/server/admin"
	"slipway/server/audit"
	"slipway/server/auth"
	"slipway/server/controlplane"
	"slipway/server/cors"
	"slipway/server/dashboard"
	"slipway/server/httpx"
	"slipway/server/orgapi"
	"slipway/server/track"
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
	// instance is the install's identity (storage.InstanceID); the docker
	// runtime labels everything with it.
	instance string
	// static reports whether the slipway binary is statically linked,
	// which the docker runtime needs; staticErr says why not.
	static    bool
	staticErr string
	audit     *track.Recorder
	gate      *runtime.Gate
	db        *bolt.DB
	// retention prunes old audit events hourly; forward delivers them to
	// SLIPWAY_AUDIT_FORWARD_URL.
	retention *audit.Retention
	forward   *audit.Forwarder
	// dash is the web dashboard at /; its sign-in calls the API through
	// the handler Handler returns.
	dash *dashboard.Dashboard
	// agentsURL is SLIPWAY_AGENTS_URL parsed (nil when unset), agents the
	// handler of that origin (Handler sets it; see agents_origin.go).
	agentsURL *url.URL
	agents    http.Handler
	// cors is SLIPWAY_CORS_ALLOW_ORIGINS as a policy (nil when unset).
	cors *cors.Policy
	// metrics is the Prometheus registry (metrics.go); nil when
	// SLIPWAY_METRICS_ADDR is unset.
	metrics *metrics
	// charts keeps the dashboard's per-deployment time series (charts.go).
	charts *charts
	// otel exports traces when an OTEL endpoint is set (otel.go); nil:
	// off.
	otel *oteltrace.Provider
}

func newApp(cfg config.Serve, db *bolt.DB, sealer *storage.Sealer, log zerolog.Logger, version string) (*app, error) {
	a := &app{cfg: cfg, log: log, version: version}
	if cfg.AgentsURL != "" {
		u, err := url.Parse(cfg.AgentsURL)
		if err != nil {
			return nil, fmt.Errorf("SLIPWAY_AGENTS_URL: %w", err)
		}
		a.agentsURL = u
	}
	policy, err := cors.FromOrigins(cfg.CORSAllowOrigins)
	if err != nil {
		return nil, fmt.Errorf("SLIPWAY_CORS_ALLOW_ORIGINS: %w", err)
	}
	a.cors = policy
	instance, err := storage.InstanceID(db)
	if err != nil {
		return nil, err
	}
	// Nothing below fails: the provider is shut down by Close.
	if a.otel, err = oteltrace.FromEnv(context.Background(), "slipway"); err != nil {
		return nil, err
	}
	if a.otel != nil {
		log.Info().Msg("OpenTelemetry traces exported over OTLP/HTTP")
	}
	a.instance = instance
	a.gate = &runtime.Gate{}
	a.static = true
	if bin, err := os.Executable(); err == nil {
		if err := docker.CheckStatic(bin); err != nil {
			a.static, a.staticErr = false, err.Error()
			log.Warn().Err(err).Msg("the slipway binary is not static: the docker runtime cannot run it in an agent image; the process runtime can")
		}
	}
	a.driver, a.why = chooseDriver(cfg, a.gate, log, instance, a.staticErr)
	log.Info().Str("runtime", a.driver.Name()).Str("reason", a.why).Str("instance_id", instance).Msg("runtime driver chosen")
	if iso, ok := a.driver.(runtime.Isolator); ok {
		i := iso.Isolation()
		log.Info().Str("mode", i.Mode).Strs("guarantees", i.Guarantees).Strs("missing", i.Missing).
			Msg("deployment code isolation")
	}
	writer := &storage.Committer{DB: db, Dense: storage.ControlPlaneDense}
	rec := &track.Recorder{
		Log:     &audit.Log{Key: sealer.Key(storage.AuditChainPurpose), Version: version},
		Update:  writer.Update,
		Trusted: cfg.Prefixes(),
	}
	a.audit = rec
	a.orgs = &orgapi.Store{DB: db, Writer: writer, Audit: rec, Sealer: sealer, DefaultAuditLogs: cfg.DefaultOrgAuditLogs}
	a.orgs.Login = &orgapi.LoginThrottle{
		PerAddress: orgapi.Limit{Burst: cfg.LoginAttempts, Window: cfg.LoginWindow},
		PerAccount: orgapi.Limit{Burst: cfg.LoginAccountAttempts, Window: cfg.LoginWindow}}
	if cfg.Metrics.Enabled() {
		token, err := metricsToken(cfg)
		if err != nil {
			return nil, err
		}
		a.metrics = newMetrics(token)
		rec.Log.Appended = a.metrics.audit.Inc
	}
	a.cp = &controlplane.Service{DB: db, Sealer: sealer, Driver: a.driver, PublicURL: cfg.PublicURL,
		AgentsURL: cfg.AgentsURL, OwnHosts: ownHosts(cfg),
		DataDir: cfg.DataDir, MaxUpload: int64(cfg.MaxUploadMB) << 20, Log: log, Writer: writer, Audit: rec,
		HealthInterval: cfg.HealthInterval, PostgresURL: cfg.PostgresURL, RedisURL: cfg.RedisURL,
		AgentLogLimit: cfg.AgentLogLimitKB << 10, Heartbeat: cfg.LogHeartbeat,
		FollowersPerCredential: cfg.LogFollowersPerCredential, FollowersMax: cfg.LogFollowersMax}
	// One relay of the agents' metrics, read by scrapes (when metrics are
	// on) and by the dashboard's charts (always).
	agents := &agentGatherer{deployments: a.cp.ServingDeployments, driver: a.driver,
		client: &http.Client{Timeout: 5 * time.Second}, timeout: 5 * time.Second}
	if a.metrics != nil {
		a.cp.Metrics = a.metrics.cp
		a.metrics.agents = agents
	}
	wireAutoscale(a.driver, a.cp.AgentOutput(), a.metrics)
	a.charts = newCharts(cfg.ChartInterval, agents.Gather, a.cp.DeploymentExists)
	a.cp.Tracing, a.cp.OTELEnv = a.otel, oteltrace.AgentEnv(os.Environ())
	if c, ok := a.driver.(runtime.OutputCapturer); ok {
		c.CaptureOutput(a.cp.AgentOutput())
	}
	a.db = db
	a.retention = &audit.Retention{Log: rec.Log, DB: db, Update: writer.Update,
		Logger: log.With().Str("component", "audit-retention").Logger()}
	// Per-organization retention (PUT /api/v1/orgs/ttl-settings); an
	// organization that set none keeps audit.DefaultRetention, 400 days.
	a.retention.For = a.orgs.AuditRetention
	a.forward = &audit.Forwarder{Log: rec.Log, DB: db, Update: writer.Update, URL: cfg.AuditForwardURL,
		Interval: cfg.AuditForwardInterval, UserAgent: "slipway/" + version,
		Logger: log.With().Str("component", "audit-forwarder").Logger()}
	return a, nil
}

// adminServer is the host administration API served on the admin socket;
// its writes go through the same committer as the HTTP API's.
func (a *app) adminServer() *admin.Server {
	s := &admin.Server{DB: a.db, Orgs: a.orgs, Log: a.audit.Log, Retention: a.retention, Forwarder: a.forward,
		Update: a.audit.Update, Logger: a.log.With().Str("component", "admin").Logger(), Instance: a.instance}
	if d, ok := a.driver.(*docker.Driver); ok {
		s.PruneImages = d.PruneImages
	}
	if d, ok := a.driver.(*swarm.Driver); ok {
		s.PruneImages = d.Docker.PruneImages // its builds are the docker runtime's
	}
	return s
}

// chooseDriver picks the runtime: docker when SLIPWAY_RUNTIME says so or,
// with auto, when an engine answers and the binary is static (notStatic is
// empty); the process driver otherwise.
func chooseDriver(cfg config.Serve, gate *runtime.Gate, log zerolog.Logger, instance, notStatic string) (runtime.Driver, string) {
	if cfg.Runtime == "fake" {
		return fake.New(50 * time.Millisecond), "SLIPWAY_RUNTIME=fake (test driver: runs nothing)"
	}
	bin, err := os.Executable()
	if err != nil {
		return unavailable{name: cfg.Runtime}, "cannot locate the slipway binary to run agents: " + err.Error()
	}
	if cfg.Runtime == "swarm" {
		return swarmDriver(cfg, gate, log, instance, bin)
	}
	var engineErr error
	if cfg.Runtime == "auto" && notStatic != "" {
		engineErr = fmt.Errorf("the docker runtime needs a static binary (%s)", notStatic)
	} else if cfg.Runtime == "docker" || cfg.Runtime == "auto" {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		c, api, err := docker.Connect(ctx)
		cancel()
		if err == nil {
			d := &docker.Driver{Client: c, Bin: bin, Root: filepath.Join(cfg.DataDir, "builds"),
				SecretsDir: filepath.Join(cfg.DataDir, "secrets"), Gate: gate, APIAddr: cfg.Addr, Instance: instance, ImageCache: cfg.ImageCache,
				PythonBaseImage: cfg.PythonBaseImage, NodeBaseImage: cfg.NodeBaseImage, BasePullTimeout: cfg.BasePullTimeout,
				DefaultMemoryMB: cfg.DefaultMemoryLimitMB, Log: log.With().Str("component", "docker-runtime").Logger()}
			return d, fmt.Sprintf("SLIPWAY_RUNTIME=%s: a Docker engine answers at %s (API %s)", cfg.Runtime, c.DaemonHost(), api)
		}
		engineErr = err
		if cfg.Runtime == "docker" {
			return unavailable{name: cfg.Runtime}, "SLIPWAY_RUNTIME=docker, but " + err.Error()
		}
	}
	d := &process.Driver{Bin: bin, Launcher: bin, Root: filepath.Join(cfg.DataDir, "deployments"), DataDir: cfg.DataDir,
		UIDLow: cfg.SandboxUIDLow, UIDHigh: cfg.SandboxUIDHigh, Gate: gate,
		Limits: process.Limits{MemoryMB: cfg.DefaultMemoryLimitMB, CPUs: cfg.DefaultCPULimit, PIDs: cfg.PidsLimit},
		Log:    log.With().Str("component", "process-runtime").Logger()}
	if err := d.Init(); err != nil {
		return unavailable{name: "process"}, err.Error()
	}
	if cfg.Runtime == "process" {
		return d, "SLIPWAY_RUNTIME=process"
	}
	return d, "SLIPWAY_RUNTIME=auto and " + engineErr.Error() + ": agents run as child processes"
}

// Start begins background work bound to ctx: the reconciler, audit
// retention (now, then hourly) and the audit forwarder (when configured).
func (a *app) Start(ctx context.Context) {
	a.cp.Start(ctx)
	a.retention.Start(ctx)
	a.forward.Start(ctx)
	a.charts.Start(ctx)
	if a.forward.Enabled() {
		a.log.Info().Str("target", audit.RedactURL(a.cfg.AuditForwardURL)).
			Dur("interval", a.cfg.AuditForwardInterval).Msg("audit forwarding enabled")
	}
}

// Close waits for background work to stop.
func (a *app) Close() {
	a.cp.Wait()
	if pd, ok := a.driver.(*process.Driver); ok {
		pd.StopAll() // child agents must not outlive the control plane
	}
	a.retention.Wait()
	a.forward.Wait()
	a.charts.Wait()
	// Last: the reconciler's and the requests' spans have ended.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.otel.Shutdown(ctx); err != nil {
		a.log.Warn().Err(err).Msg("traces not exported at shutdown")
	}
}

// Handler is the whole HTTP surface of `serve`.
func (a *app) Handler() http.Handler {
	rt := httpx.Record(httpx.NewRouter())
	if a.metrics != nil {
		rt.Wrap = a.metrics.route
		rt.NotFound = a.metrics.unmatched(rt.NotFound)
		rt.MethodNotAllowed = a.metrics.unmatched(rt.MethodNotAllowed)
	}
	px := a.register(rt)
	// API bodies are small; uploads stream through their own cap.
	serve := a.agentAPI(px)
	own := a.byHost(limitNonUpload(a.traceRequests(rt), 1<<20), serve)
	a.dash.API = own
	a.agents = a.agentsOrigin(serve, px.uiAssetRoutes)
	agents := a.agents
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.agentsHost(r) {
			agents.ServeHTTP(w, r)
			return
		}
		own.ServeHTTP(w, r)
	})
	if strings.HasPrefix(strings.ToLower(a.cfg.PublicURL), "https://") {
		// The dashboard's cookies are Secure and __Host- prefixed.
		h = auth.ServedOverHTTPS(h)
		a.agents = auth.ServedOverHTTPS(a.agents)
	}
	return h
}

// byHost serves a deployment whose custom_url names the request's host as
// if it were /agents/{name}/{path}. The deployment's workspace is the one
// the credential must be able to use; Slipway's own host never routes.
func (a *app) byHost(next http.Handler, serve httprouter.Handle) http.Handler {
	own := ""
	if u, err := url.Parse(a.cfg.PublicURL); err == nil {
		own = strings.ToLower(u.Hostname())
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if host == "" || strings.EqualFold(host, own) || net.ParseIP(host) != nil || strings.EqualFold(host, "localhost") {
			next.ServeHTTP(w, r)
			return
		}
		route, ok := a.cp.DeploymentByHost(host)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		r.Header.Set("X-Tenant-Id", route.WorkspaceID)
		r = r.WithContext(context.WithValue(r.Context(), customHostKey{}, true))
		serve(w, r, httprouter.Params{{Key: "name", Value: route.Name}, {Key: "path", Value: r.URL.Path}})
	})
}

// limitNonUpload caps every API body at max, whatever the method, except
// two routes that must not be capped here:
//   - PUT .../v2/uploads/{id}: source archives stream to disk through their
//     own cap (SLIPWAY_MAX_UPLOAD_MB), checked as they arrive;
//   - /agents/{name}/...: the proxy streams bodies to the agent without
//     buffering them, so Slipway's memory does not grow with them, and the
//     agent enforces its own limit (SLIPWAY_AGENT_MAX_BODY_MB).
func limitNonUpload(h http.Handler, max int64) http.Handler {
	limited := httpx.LimitBody(h, max)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isUpload(r) || strings.HasPrefix(r.URL.Path, "/agents/") {
			h.ServeHTTP(w, r)
			return
		}
		limited.ServeHTTP(w, r)
	})
}

// isUpload reports whether r is a PUT to the pre-signed upload route,
// under either API prefix.
func isUpload(r *http.Request) bool {
	if r.Method != http.MethodPut {
		return false
	}
	p := strings.TrimPrefix(r.URL.Path, "/api-host")
	id, ok := strings.CutPrefix(p, "/v2/uploads/")
	return ok && id != "" && !strings.Contains(id, "/")
}

func (a *app) ok(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"ok": true})
}

func (a *app) info(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	rt := map[string]any{"driver": a.driver.Name(), "reason": a.why, "static_binary": a.static}
	if !a.static {
		rt["static_binary_error"] = a.staticErr
	}
	if iso, ok := a.driver.(runtime.Isolator); ok {
		rt["isolation"] = iso.Isolation()
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"version": a.version, "instance_id": a.instance, "runtime": rt})
}
