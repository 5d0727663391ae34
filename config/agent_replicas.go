package config

import (
	"fmt"
	"net/url"
)

// Agent roles (SLIPWAY_AGENT_ROLE).
const (
	// AgentRoleAll serves the API and executes runs: one process, or
	// several over PostgreSQL and Redis.
	AgentRoleAll = "all"
	// AgentRoleAPI serves the API and never executes runs: queue workers do.
	AgentRoleAPI = "api"
	// AgentRoleQueue executes runs and serves only /ok and /metrics.
	AgentRoleQueue = "queue"
)

// AgentReplicas configures an agent that is one of several processes of a
// deployment: API replicas and queue workers over one PostgreSQL database
// (SLIPWAY_AGENT_POSTGRES_URL) and one Redis (what moves between them: a
// run's stream events, cancellations, "run queued" wake-ups).
type AgentReplicas struct {
	Role string `env:"SLIPWAY_AGENT_ROLE" envDefault:"all"`
	// RedisURL is redis:// or rediss://, with an ACL user and password
	// when the server has them. It holds a password: the agent drops it
	// from its environment before any graph runs.
	RedisURL string `env:"SLIPWAY_AGENT_REDIS_URL"`
	// RedisPrefix starts every key and channel the agent uses, so that
	// deployments can share a Redis server.
	RedisPrefix string `env:"SLIPWAY_AGENT_REDIS_PREFIX" envDefault:"slipway:"`
	// WorkerID names this process in logs and in a run's metadata; empty
	// is hostname-pid.
	WorkerID string `env:"SLIPWAY_AGENT_WORKER_ID"`
	// DBMaxConnections bounds the PostgreSQL pool (the spec's
	// db_max_connections); 0 is pgx's default.
	DBMaxConnections int `env:"SLIPWAY_AGENT_DB_MAX_CONNECTIONS"`
	// LeaseSeconds is how long a worker's claim on a running run holds
	// without a renewal: a run whose worker died is taken over by another
	// worker about this long after its last renewal.
	LeaseSeconds int `env:"SLIPWAY_AGENT_RUN_LEASE_SECONDS" envDefault:"30"`
}

// check refuses a role it does not know, a split role without the shared
// state it needs, and a Redis URL that does not parse; errors never quote
// the URL, which holds a password.
func (r AgentReplicas) check(postgresURL string) error {
	switch r.Role {
	case AgentRoleAll:
	case AgentRoleAPI, AgentRoleQueue:
		if postgresURL == "" || r.RedisURL == "" {
			return &Error{fmt.Sprintf("SLIPWAY_AGENT_ROLE=%s: needs SLIPWAY_AGENT_POSTGRES_URL and SLIPWAY_AGENT_REDIS_URL "+
				"(API replicas and queue workers share threads and runs through PostgreSQL, and streams, cancellations and wake-ups through Redis)", r.Role)}
		}
	default:
		return &Error{fmt.Sprintf("SLIPWAY_AGENT_ROLE: %q is not all, api or queue", r.Role)}
	}
	if r.RedisURL != "" {
		if postgresURL == "" {
			return &Error{"SLIPWAY_AGENT_REDIS_URL: needs SLIPWAY_AGENT_POSTGRES_URL (Redis carries what moves between replicas; their state is in PostgreSQL)"}
		}
		u, err := url.Parse(r.RedisURL)
		if err != nil {
			return &Error{"SLIPWAY_AGENT_REDIS_URL: not a URL (redis://user:password@host:port/db)"}
		}
		if u.Scheme != "redis" && u.Scheme != "rediss" {
			return &Error{fmt.Sprintf("SLIPWAY_AGENT_REDIS_URL: scheme %q is not redis or rediss", u.Scheme)}
		}
	}
	if r.RedisPrefix == "" {
		return &Error{"SLIPWAY_AGENT_REDIS_PREFIX: must not be empty (deployments sharing a Redis server are told apart by it)"}
	}
	if r.DBMaxConnections < 0 || r.DBMaxConnections > 10000 {
		return &Error{fmt.Sprintf("SLIPWAY_AGENT_DB_MAX_CONNECTIONS: %d is outside 0..10000", r.DBMaxConnections)}
	}
	if r.LeaseSeconds < 2 || r.LeaseSeconds > 3600 {
		return &Error{fmt.Sprintf("SLIPWAY_AGENT_RUN_LEASE_SECONDS: %d is outside 2..3600", r.LeaseSeconds)}
	}
	return nil
}
