package agentapi_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"slipway/server/servertest"
)

// The Redis URL (it holds a password) never reaches a graph, nor does the
// PostgreSQL one, in an agent that is one of several processes: a command
// graph reports what its environment holds of them, and of a variable
// the agent leaves alone.
func TestRedisURLHiddenFromGraphs(t *testing.T) {
	app := t.TempDir()
	script := `cat >/dev/null; printf '{"event":"updates","node":"env","data":{"redis":"%s","pg":"%s","other":"%s"}}\n' "$SLIPWAY_AGENT_REDIS_URL" "$SLIPWAY_AGENT_POSTGRES_URL" "$SLIPWAY_TEST_VISIBLE"`
	cfg, _ := json.Marshal(map[string]any{"graphs": map[string]any{"env": map[string]any{"command": []string{"sh", "-c", script}}}, "dependencies": []string{"."}})
	if err := os.WriteFile(filepath.Join(app, "langgraph.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	redisURL, prefix := servertest.RedisPrefix(t)
	a := servertest.StartAgent(t, map[string]string{
		"SLIPWAY_GRAPH_CONFIG":       filepath.Join(app, "langgraph.json"),
		"SLIPWAY_AGENT_POSTGRES_URL": servertest.PostgresSchemaURL(t),
		"SLIPWAY_AGENT_REDIS_URL":    redisURL,
		"SLIPWAY_AGENT_REDIS_PREFIX": prefix,
		"SLIPWAY_TEST_VISIBLE":       "seen",
	})
	r := a.Do("POST", "/runs/wait", map[string]any{"assistant_id": "env", "input": map[string]any{}})
	if r.Status != 200 {
		t.Fatalf("run: %d %s", r.Status, r.Body)
	}
	out := r.Map()
	if out["other"] != "seen" || out["redis"] != "" || out["pg"] != "" {
		t.Fatalf("the graph saw SLIPWAY_TEST_VISIBLE=%v, SLIPWAY_AGENT_REDIS_URL set: %v, SLIPWAY_AGENT_POSTGRES_URL set: %v; want seen, false, false",
			out["other"], out["redis"] != "", out["pg"] != "")
	}
}
