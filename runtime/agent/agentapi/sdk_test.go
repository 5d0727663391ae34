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
	sdkOnPostgres(t, runJSSDK)
}

// TestOfficialPythonSDK runs sdktest/test_agent.py, agent.test.mjs's
// tests through the official Python SDK, against a real `slipway agent`.
// The test virtualenv (servertest.SDKPython) is needed: CI must have it
// (the test fails there without it); elsewhere it skips.
func TestOfficialPythonSDK(t *testing.T) {
	runPySDK(t, nil)
}

// TestOfficialPythonSDKOnPostgres is the Python suite against an agent on
// PostgreSQL.
func TestOfficialPythonSDKOnPostgres(t *testing.T) {
	sdkOnPostgres(t, runPySDK)
}

// TestOfficialPythonSDKOnPostgresAndRedis is the Python suite against an
// agent in role all over PostgreSQL and Redis.
func TestOfficialPythonSDKOnPostgresAndRedis(t *testing.T) {
	sdkOnPostgresAndRedis(t, runPySDK)
}

// sdkOnPostgres runs a suite against an agent keeping its state in a
// fresh PostgreSQL schema, and checks the suite's state is there.
func sdkOnPostgres(t *testing.T, run func(*testing.T, map[string]string)) {
	url := servertest.PostgresSchemaURL(t)
	run(t, map[string]string{"SLIPWAY_AGENT_POSTGRES_URL": url})
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
	sdkOnPostgresAndRedis(t, runJSSDK)
}

// sdkOnPostgresAndRedis runs a suite against an agent in role all over
// PostgreSQL and Redis, and checks the suite's run streams went through
// Redis.
func sdkOnPostgresAndRedis(t *testing.T, run func(*testing.T, map[string]string)) {
	redisURL, prefix := servertest.RedisPrefix(t)
	run(t, map[string]string{"SLIPWAY_AGENT_POSTGRES_URL": servertest.PostgresSchemaURL(t),
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
	a := startSDKAgent(t, env)
	cmd := exec.Command("node", "--test", "--test-reporter=spec", "agent.test.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "AGENT_URL="+a.URL)
	out, err := cmd.CombinedOutput()
	t.Logf("node --test:\n%s", out)
	if err != nil {
		t.Fatalf("JS SDK tests failed: %v\nagent log:\n%s", err, a.Logs())
	}
}

// runPySDK runs the official Python SDK suite against an agent started
// with env added to its own.
func runPySDK(t *testing.T, env map[string]string) {
	servertest.SDKPython(t)
	a := startSDKAgent(t, env)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log:\n%s", a.Logs())
		}
	})
	servertest.RunPySDKSuite(t, a.URL, "")
}

// startSDKAgent starts the agent the SDK suites drive: the built-in echo
// graph, and the counter command graph for the human-in-the-loop test
// (echo never interrupts), with env added to its environment.
func startSDKAgent(t *testing.T, env map[string]string) *servertest.Agent {
	t.Helper()
	agentEnv := map[string]string{"SLIPWAY_LOG_LEVEL": "warn", "SLIPWAY_GRAPH_CONFIG": counterApp(t, nil)}
	for k, v := range env {
		agentEnv[k] = v
	}
	return servertest.StartAgent(t, agentEnv)
}
