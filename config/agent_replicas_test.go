package config

import (
	"strings"
	"testing"
)

func TestLoadAgentReplicas(t *testing.T) {
	const pg, rd = "postgres://u:secretpw@db/agent", "redis://user:secretpw@cache:6379/0"
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
		check   func(AgentReplicas) bool
	}{
		{name: "default: one process", env: map[string]string{},
			check: func(r AgentReplicas) bool {
				return r.Role == AgentRoleAll && r.RedisPrefix == "slipway:" && r.LeaseSeconds == 30
			}},
		{name: "api with both", env: map[string]string{"SLIPWAY_AGENT_ROLE": "api", "SLIPWAY_AGENT_POSTGRES_URL": pg, "SLIPWAY_AGENT_REDIS_URL": rd,
			"SLIPWAY_AGENT_REDIS_PREFIX": "dep1:", "SLIPWAY_AGENT_WORKER_ID": "api-1", "SLIPWAY_AGENT_DB_MAX_CONNECTIONS": "7"},
			check: func(r AgentReplicas) bool {
				return r.Role == "api" && r.RedisPrefix == "dep1:" && r.WorkerID == "api-1" && r.DBMaxConnections == 7
			}},
		{name: "queue over rediss", env: map[string]string{"SLIPWAY_AGENT_ROLE": "queue", "SLIPWAY_AGENT_POSTGRES_URL": pg, "SLIPWAY_AGENT_REDIS_URL": "rediss://cache:6380"},
			check: func(r AgentReplicas) bool { return r.Role == "queue" }},
		{name: "queue without Redis", env: map[string]string{"SLIPWAY_AGENT_ROLE": "queue", "SLIPWAY_AGENT_POSTGRES_URL": pg},
			wantErr: "SLIPWAY_AGENT_ROLE=queue: needs SLIPWAY_AGENT_POSTGRES_URL and SLIPWAY_AGENT_REDIS_URL"},
		{name: "api without PostgreSQL", env: map[string]string{"SLIPWAY_AGENT_ROLE": "api", "SLIPWAY_AGENT_REDIS_URL": rd},
			wantErr: "SLIPWAY_AGENT_ROLE=api: needs"},
		{name: "unknown role", env: map[string]string{"SLIPWAY_AGENT_ROLE": "worker"}, wantErr: `"worker" is not all, api or queue`},
		{name: "Redis without PostgreSQL", env: map[string]string{"SLIPWAY_AGENT_REDIS_URL": rd}, wantErr: "SLIPWAY_AGENT_REDIS_URL: needs SLIPWAY_AGENT_POSTGRES_URL"},
		{name: "not a Redis URL", env: map[string]string{"SLIPWAY_AGENT_POSTGRES_URL": pg, "SLIPWAY_AGENT_REDIS_URL": "http://user:secretpw@cache"},
			wantErr: `scheme "http" is not redis or rediss`},
		{name: "negative pool", env: map[string]string{"SLIPWAY_AGENT_DB_MAX_CONNECTIONS": "-1"}, wantErr: "SLIPWAY_AGENT_DB_MAX_CONNECTIONS"},
		{name: "lease too short", env: map[string]string{"SLIPWAY_AGENT_RUN_LEASE_SECONDS": "1"}, wantErr: "SLIPWAY_AGENT_RUN_LEASE_SECONDS"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := LoadAgent(tc.env)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "secretpw") {
					t.Fatalf("the error quotes a password: %v", err)
				}
				return
			}
			if err != nil || !tc.check(c.AgentReplicas) {
				t.Fatalf("%v %+v", err, c.AgentReplicas)
			}
		})
	}
}
