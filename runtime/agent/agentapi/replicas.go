package agentapi

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"

	"slipway/config"
	"slipway/runtime/agent"
	"slipway/server/httpx"
)

// replicaSetup makes the engine one of several processes when
// SLIPWAY_AGENT_REDIS_URL is set: it connects the bus and sets the role,
// the worker's name and the lease. closeBus releases the connection once
// the engine has stopped.
func replicaSetup(ctx context.Context, cfg config.Agent, eng *agent.Engine) (closeBus func(), err error) {
	eng.Role = cfg.Role
	if cfg.RedisURL == "" {
		return func() {}, nil
	}
	bus, err := agent.OpenRedisBus(ctx, cfg.RedisURL, cfg.RedisPrefix)
	if err != nil {
		return nil, fmt.Errorf("SLIPWAY_AGENT_REDIS_URL: %w", err)
	}
	eng.Bus = bus
	eng.WorkerID = cfg.WorkerID
	if eng.WorkerID == "" {
		host, _ := os.Hostname()
		eng.WorkerID = host + "-" + strconv.Itoa(os.Getpid())
	}
	eng.Lease = time.Duration(cfg.LeaseSeconds) * time.Second
	return func() { _ = bus.Close() }, nil
}

// queueOnly is a queue worker's HTTP surface: /ok and /metrics, what its
// health check and scraping need; the API is the API replicas'.
func queueOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok", "/metrics":
			h.ServeHTTP(w, r)
		default:
			httpx.WriteJSON(w, http.StatusNotFound, map[string]any{"detail": "This is a queue worker: it executes runs and serves no API (SLIPWAY_AGENT_ROLE=queue)."})
		}
	})
}
