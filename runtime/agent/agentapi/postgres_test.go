package agentapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"slipway/runtime/agent"
	"slipway/runtime/agent/agentapi"
	"slipway/server/servertest"
)

// startPGAgent serves the agent API in process over an engine whose state
// is in PostgreSQL.
func startPGAgent(t *testing.T, workers int) string {
	t.Helper()
	store, closeStore, err := agent.OpenPostgresStore(context.Background(), servertest.PostgresSchemaURL(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	eng := &agent.Engine{Store: store, Graphs: map[string]agent.Graph{"echo": agent.Echo{}}, Workers: workers, Timeout: time.Minute, Log: zerolog.Nop()}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&agentapi.API{Engine: eng, MaxBody: 1 << 20}).Handler())
	t.Cleanup(func() {
		srv.Close()
		stop()
		eng.Wait()
		closeStore()
	})
	return srv.URL
}

// The reject race (exactly one run admitted on an idle thread, none on a
// busy one, 50 requests at once) with the engine on PostgreSQL.
func TestRejectIsAtomicOnPostgres(t *testing.T) {
	rejectRounds(t, startPGAgent(t, 64))
}

// A thread's life through the API with the engine on PostgreSQL: a run
// waited for, its state, the thread found by search and by its status.
func TestThreadRunStateOnPostgres(t *testing.T) {
	url := startPGAgent(t, 4)
	do := func(method, path, body string) (int, map[string]any, []any) {
		t.Helper()
		req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v any
		_ = json.NewDecoder(resp.Body).Decode(&v)
		m, _ := v.(map[string]any)
		l, _ := v.([]any)
		return resp.StatusCode, m, l
	}
	st, th, _ := do("POST", "/threads", `{"metadata":{"team":"a"}}`)
	if st != 200 {
		t.Fatalf("create thread: %d %v", st, th)
	}
	id := th["thread_id"].(string)
	st, out, _ := do("POST", "/threads/"+id+"/runs/wait", `{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"hello pg"}]}}`)
	if st != 200 || !strings.Contains(fmt.Sprint(out), "hello pg") {
		t.Fatalf("wait: %d %v", st, out)
	}
	st, state, _ := do("GET", "/threads/"+id+"/state", "")
	if st != 200 || !strings.Contains(fmt.Sprint(state["values"]), "hello pg") {
		t.Fatalf("state: %d %v", st, state)
	}
	st, _, found := do("POST", "/threads/search", `{"metadata":{"team":"a"},"status":"idle"}`)
	if st != 200 || len(found) != 1 || found[0].(map[string]any)["thread_id"] != id {
		t.Fatalf("search: %d %v", st, found)
	}
	st, _, runs := do("GET", "/threads/"+id+"/runs", "")
	if st != 200 || len(runs) != 1 || runs[0].(map[string]any)["status"] != "success" {
		t.Fatalf("runs: %d %v", st, runs)
	}
}

// The store's connection string (it holds a password) never reaches a
// graph: a command graph reports what its environment holds of it, and
// of a variable the agent leaves alone.
func TestPostgresURLHiddenFromGraphs(t *testing.T) {
	app := t.TempDir()
	script := `cat >/dev/null; printf '{"event":"updates","node":"env","data":{"pg":"%s","other":"%s"}}\n' "$SLIPWAY_AGENT_POSTGRES_URL" "$SLIPWAY_TEST_VISIBLE"`
	cfg, _ := json.Marshal(map[string]any{"graphs": map[string]any{"env": map[string]any{"command": []string{"sh", "-c", script}}}, "dependencies": []string{"."}})
	if err := os.WriteFile(filepath.Join(app, "langgraph.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	a := servertest.StartAgent(t, map[string]string{
		"SLIPWAY_GRAPH_CONFIG":       filepath.Join(app, "langgraph.json"),
		"SLIPWAY_AGENT_POSTGRES_URL": servertest.PostgresSchemaURL(t),
		"SLIPWAY_TEST_VISIBLE":       "seen",
	})
	r := a.Do("POST", "/runs/wait", map[string]any{"assistant_id": "env", "input": map[string]any{}})
	if r.Status != 200 {
		t.Fatalf("run: %d %s", r.Status, r.Body)
	}
	out := r.Map()
	if out["other"] != "seen" || out["pg"] != "" {
		// The value is not printed: it holds the test role's password.
		t.Fatalf("the graph saw SLIPWAY_TEST_VISIBLE=%v and SLIPWAY_AGENT_POSTGRES_URL set: %v, want seen and false", out["other"], out["pg"] != "")
	}
}
