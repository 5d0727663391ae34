package agentapi_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"slipway/server/servertest"
)

// TestOfficialJSSDK runs sdktest/agent.test.mjs with node against a real
// `slipway agent`. Node and `npm ci` in sdktest are needed: CI must have
// them (the test fails there without them); elsewhere it skips.
func TestOfficialJSSDK(t *testing.T) {
	runJSSDK(t, nil)
}

// TestOfficialJSSDKOnPostgres is the same suite against a `slipway agent`
// keeping its state in PostgreSQL (SLIPWAY_AGENT_POSTGRES_URL).
func TestOfficialJSSDKOnPostgres(t *testing.T) {
	url := servertest.PostgresSchemaURL(t)
	runJSSDK(t, map[string]string{"SLIPWAY_AGENT_POSTGRES_URL": url})
	// The suite's threads and runs are in the database, not in a bbolt
	// file beside it.
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal("connect to the agent's schema")
	}
	defer c.Close(ctx)
	var threads, runs int
	if err := c.QueryRow(ctx, "select (select count(*) from threads), (select count(*) from runs)").Scan(&threads, &runs); err != nil {
		t.Fatal(err)
	}
	if threads == 0 || runs == 0 {
		t.Fatalf("the agent kept %d threads and %d runs in PostgreSQL, want the suite's", threads, runs)
	}
}

// TestOfficialJSSDKOnPostgresAndRedis is the same suite against a
// `slipway agent` in role all over PostgreSQL and Redis: every run is
// claimed under a lease by the engine's queue worker after a wake-up on
// Redis, its events reach the client through a Redis Stream, and
// cancellations go over Redis, as between replicas.
func TestOfficialJSSDKOnPostgresAndRedis(t *testing.T) {
	redisURL, prefix := servertest.RedisPrefix(t)
	runJSSDK(t, map[string]string{"SLIPWAY_AGENT_POSTGRES_URL": servertest.PostgresSchemaURL(t),
		"SLIPWAY_AGENT_REDIS_URL": redisURL, "SLIPWAY_AGENT_REDIS_PREFIX": prefix})
	if servertest.RedisKeys(t, redisURL, prefix) == 0 {
		t.Fatal("the suite's run streams are not in Redis")
	}
}

// runJSSDK runs the official JS SDK suite against an agent started with
// env added to its own.
func runJSSDK(t *testing.T, env map[string]string) {
	dir, _ := filepath.Abs("sdktest")
	_, nodeErr := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join(dir, "node_modules", "@langchain", "langgraph-sdk"))
	if nodeErr != nil || modErr != nil {
		msg := "node and `npm ci` in runtime/agent/agentapi/sdktest are needed for the JS SDK tests"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	// The built-in echo graph, and the counter command graph for the
	// human-in-the-loop test (echo never interrupts).
	agentEnv := map[string]string{"SLIPWAY_LOG_LEVEL": "warn", "SLIPWAY_GRAPH_CONFIG": counterApp(t, nil)}
	for k, v := range env {
		agentEnv[k] = v
	}
	a := servertest.StartAgent(t, agentEnv)
	cmd := exec.Command("node", "--test", "--test-reporter=spec", "agent.test.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "AGENT_URL="+a.URL)
	out, err := cmd.CombinedOutput()
	t.Logf("node --test:\n%s", out)
	if err != nil {
		t.Fatalf("JS SDK tests failed: %v\nagent log:\n%s", err, a.Logs())
	}
}
