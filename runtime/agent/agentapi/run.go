// Package agentapi serves one deployment's agent server API: the surface
// the official SDKs use (assistants, threads, runs with SSE, store).
package agentapi

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/rs/zerolog"

	"slipway/config"
	"slipway/oteltrace"
	"slipway/runtime"
	"slipway/runtime/agent"
	"slipway/runtime/agent/hosts"
	"slipway/server/cors"
	"slipway/server/httpx"
)

// Run serves the agent API until ctx ends. On SIGTERM it stops accepting,
// lets in-flight requests finish, and stops runs: running ones end as the
// next start finds them (error: the server restarted), pending ones stay
// queued and run after the restart.
func Run(ctx context.Context, cfg config.Agent, log zerolog.Logger, version string) error {
	// Agents share a host with each other and with the control plane: keep
	// the Go heap near a soft limit unless the operator chose one.
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(40 << 20)
		// Under that limit, collect at five times the live heap rather
		// than twice: the run path allocates a run's frames and rows
		// quickly, and with Go's default the collector took a fifth of
		// the agent's CPU under load and showed in run creation's tail
		// (BENCHMARKS.md, "The agent's collector"). The limit still
		// bounds the heap.
		if os.Getenv("GOGC") == "" {
			debug.SetGCPercent(400)
		}
	}
	// The token is Slipway's, not the deployment's: graphs must not learn
	// it (token.go).
	if err := takeToken(&cfg); err != nil {
		return err
	}
	// The store's connection string holds a password: graphs inherit
	// this environment, so it leaves it before they load.
	os.Unsetenv("SLIPWAY_AGENT_POSTGRES_URL")
	os.Unsetenv("SLIPWAY_AGENT_REDIS_URL")
	// Listen first, serve once the graphs are loaded. The process runtime
	// picks a free port and hands it over in SLIPWAY_AGENT_ADDR: until
	// this bind, any other socket on the host may take that port, and
	// loading a project's graphs takes seconds. Requests that come early
	// wait in the listen backlog.
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s (SLIPWAY_AGENT_ADDR): %w", cfg.Addr, err)
	}
	defer ln.Close() // when a step below fails; Serve closes it otherwise
	project, err := agent.LoadProject(cfg.GraphConfig)
	if err != nil {
		return err
	}
	// The project's env reaches every graph: command graphs and language
	// hosts inherit this process's environment.
	if err := project.ApplyEnv(); err != nil {
		return err
	}
	defaults, err := agent.DefaultConfigs(os.Getenv("LANGGRAPH_CONFIG"))
	if err != nil {
		return err
	}
	graphs, warnings, err := agent.LoadGraphs(cfg.GraphConfig, os.Environ())
	if err != nil {
		return err
	}
	for _, w := range warnings {
		log.Warn().Msg(w)
	}
	app, err := agent.HostAppFor(project.HTTPApp, filepath.Dir(cfg.GraphConfig))
	if err != nil {
		return err
	}
	// Generative UI is bundled before anything is served: a UI that does
	// not build fails the start, as a graph that does not load does.
	ui, err := agent.BundleUI(filepath.Dir(cfg.GraphConfig), project.UI, project.UIShared)
	if err != nil {
		return fmt.Errorf("generative UI: %w", err)
	}
	for graph, files := range ui {
		size := 0
		for _, f := range files {
			size += len(f.Contents)
		}
		log.Info().Str("graph", graph).Int("files", len(files)).Int("bytes", size).Msg("generative UI bundled")
	}
	// After ApplyEnv: the OTEL_* variables are the operator's (passed by
	// the control plane) unless the deployment set its own.
	otel, err := oteltrace.FromEnv(ctx, "slipway-agent")
	if err != nil {
		return err
	}
	if otel != nil {
		log.Info().Msg("OpenTelemetry traces exported over OTLP/HTTP")
	}
	defer func() {
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := otel.Shutdown(shut); err != nil {
			log.Warn().Err(err).Msg("traces not exported at shutdown")
		}
	}()
	db, store, closeStore, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer closeStore()
	if store != nil {
		log.Info().Msg("agent state in PostgreSQL (SLIPWAY_AGENT_POSTGRES_URL)")
	}
	runCtx, stopRuns := context.WithCancel(context.Background())
	defer stopRuns()
	hostProcs := cfg.HostProcesses
	if hostProcs <= 0 {
		hostProcs = hosts.AutoProcesses()
	}
	eng := &agent.Engine{DB: db, Store: store, Graphs: graphs, Workers: cfg.Workers, Timeout: time.Duration(cfg.RunTimeout) * time.Second, Log: log,
		DefaultConfigs: defaults, Python: cfg.Python, HostProcesses: hostProcs, HostNice: cfg.HostNice, App: app, TTL: project.TTL, Metrics: agent.NewMetrics(), Tracing: otel}
	closeBus, err := replicaSetup(ctx, cfg, eng)
	if err != nil {
		return err
	}
	defer closeBus()
	// Language hosts load every "path:attr" graph before anything is
	// served: a graph that fails to import fails the start, with the
	// loader's message, so a revision never serves without its graph.
	if err := eng.StartHosts(runCtx, cfg.DataDir, nil); err != nil {
		return fmt.Errorf("load graphs: %w", err)
	}
	if err := eng.Start(runCtx); err != nil {
		return fmt.Errorf("start agent engine: %w", err)
	}
	api := &API{Engine: eng, Version: version, MaxBody: int64(cfg.MaxBodyMB) << 20, Disabled: project.Disabled, UI: ui, Tracing: otel}
	policy, err := projectCORS(cfg.GraphConfig)
	if err != nil {
		return err
	}
	var handler http.Handler = RequireToken(cfg.Token, cors.Middleware(policy, api.Handler()))
	if cfg.Role == config.AgentRoleQueue {
		handler = queueOnly(handler)
	}
	srv := &http.Server{Handler: httpx.ChainQuiet(handler, log, healthCheck(os.Getenv)), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	ids := make([]string, 0, len(graphs))
	for id := range graphs {
		ids = append(ids, id)
	}
	log.Info().Str("addr", ln.Addr().String()).Strs("graphs", ids).Int("workers", cfg.Workers).Str("role", cfg.Role).
		Bool("redis", cfg.RedisURL != "").Str("worker_id", eng.WorkerID).Msg("slipway agent serving")
	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn().Err(err).Msg("shutdown did not finish cleanly")
	}
	stopRuns()
	eng.Wait()
	return nil
}

// RequireToken answers 401 to requests without token in
// runtime.AgentTokenHeader; an empty token lets every request through (an
// agent run by hand, or in a container on a network of its own).
func RequireToken(token string, h http.Handler) http.Handler {
	if token == "" {
		return h
	}
	want := []byte(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get(runtime.AgentTokenHeader)
		if subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			httpx.WriteJSON(w, http.StatusUnauthorized, map[string]any{"detail": "This agent server answers only the Slipway server that started it."})
			return
		}
		r.Header.Del(runtime.AgentTokenHeader)
		h.ServeHTTP(w, r)
	})
}
