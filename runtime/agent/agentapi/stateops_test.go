package agentapi_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"slipway/runtime/agent"
	"slipway/runtime/agent/agentapi"
	"slipway/storage"
)

// echoAPI serves the API with the built-in echo graph in the test process.
func echoAPI(t *testing.T) inProcess {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "agent.db"), time.Second, agent.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	eng := &agent.Engine{DB: db, Graphs: map[string]agent.Graph{"echo": agent.Echo{}}, Workers: 4, Timeout: time.Minute, Log: zerolog.Nop()}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&agentapi.API{Engine: eng, MaxBody: 1 << 20}).Handler())
	t.Cleanup(func() {
		srv.Close()
		stop()
		eng.Wait()
		db.Close()
	})
	return inProcess{t: t, url: srv.URL}
}

// TestSuperstepsOnCreate: POST /threads with supersteps applies each
// superstep as one checkpoint of the built-in graph, its updates in
// order; a superstep that cannot be applied creates nothing.
func TestSuperstepsOnCreate(t *testing.T) {
	a := echoAPI(t)
	r := a.Do("POST", "/threads", map[string]any{
		"metadata": map[string]any{"graph_id": "echo"},
		"supersteps": []any{
			map[string]any{"updates": []any{
				map[string]any{"values": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}, "as_node": "echo"},
				map[string]any{"values": map[string]any{"note": "x"}, "as_node": "other"},
			}},
			map[string]any{"updates": []any{map[string]any{"values": map[string]any{"note": "y"}}}},
		},
	})
	if r.Status != 200 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	th := r.Map()
	id := th["thread_id"].(string)
	if v := th["values"].(map[string]any); v["note"] != "y" || len(v["messages"].([]any)) != 1 {
		t.Fatalf("values: %v", v)
	}
	h := a.Do("GET", "/threads/"+id+"/history", nil)
	var hist []map[string]any
	for _, c := range h.JSON().([]any) {
		hist = append(hist, c.(map[string]any))
	}
	if len(hist) != 2 {
		t.Fatalf("history: want one checkpoint per superstep, got %d: %s", len(hist), h.Body)
	}
	first := hist[1]["metadata"].(map[string]any)["writes"].(map[string]any)
	last := hist[0]["metadata"].(map[string]any)["writes"].(map[string]any)
	if first["echo"] == nil || first["other"] == nil || last["__update__"] == nil {
		t.Fatalf("writes: first %v, last %v", first, last)
	}
	// A run continues from the supersteps' state.
	if r := a.Do("POST", "/threads/"+id+"/runs/wait", map[string]any{"assistant_id": "echo", "input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "again"}}}}); r.Status != 200 || len(r.Map()["messages"].([]any)) != 3 {
		t.Fatalf("run after supersteps: %d %s", r.Status, r.Body)
	}

	const tid = "8f0d7c1e-2a3b-4c5d-9e6f-7a8b9c0d1e2f"
	one := func(u map[string]any) []any { return []any{map[string]any{"updates": []any{u}}} }
	for _, tc := range []struct {
		name   string
		body   map[string]any
		status int
	}{
		{"no graph", map[string]any{"supersteps": one(map[string]any{"values": map[string]any{"a": 1}})}, 400},
		{"unknown graph", map[string]any{"metadata": map[string]any{"graph_id": "nope"}, "supersteps": one(map[string]any{"values": map[string]any{"a": 1}})}, 404},
		{"command on a built-in graph", map[string]any{"metadata": map[string]any{"graph_id": "echo"}, "supersteps": []any{
			map[string]any{"updates": []any{map[string]any{"values": map[string]any{"a": 1}}}},
			map[string]any{"updates": []any{map[string]any{"command": map[string]any{"resume": 1}}}},
		}}, 422},
		{"values not an object", map[string]any{"metadata": map[string]any{"graph_id": "echo"}, "supersteps": one(map[string]any{"values": []any{1}})}, 422},
		{"neither values nor command", map[string]any{"metadata": map[string]any{"graph_id": "echo"}, "supersteps": one(map[string]any{"as_node": "echo"})}, 422},
		{"updates not a list", map[string]any{"metadata": map[string]any{"graph_id": "echo"}, "supersteps": []any{map[string]any{"updates": "x"}}}, 422},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.body["thread_id"] = tid
			r := a.Do("POST", "/threads", tc.body)
			if r.Status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.status, r.Body)
			}
			if _, ok := r.Map()["detail"]; !ok {
				t.Fatalf("no detail: %s", r.Body)
			}
			if g := a.Do("GET", "/threads/"+tid, nil); g.Status != 404 {
				t.Fatalf("a failed create left the thread: %d %s", g.Status, g.Body)
			}
		})
	}
}

// TestCancelMany: POST /runs/cancel cancels by run ids or by status; the
// runs read interrupted (or, rolled back while pending, gone) as soon as it
// answers; nothing left to cancel is a 404; bad bodies are 422s.
func TestCancelMany(t *testing.T) {
	a := echoAPI(t)
	th := a.Do("POST", "/threads", map[string]any{}).Map()["thread_id"].(string)
	running := a.Do("POST", "/threads/"+th+"/runs", runBody("slow", 30, "")).Map()["run_id"].(string)
	pending := a.Do("POST", "/threads/"+th+"/runs", runBody("queued", 0, "enqueue")).Map()["run_id"].(string)
	if r := a.Do("POST", "/runs/cancel", map[string]any{"status": "all"}); r.Status != 204 {
		t.Fatalf("cancel all: %d %s", r.Status, r.Body)
	}
	for _, id := range []string{running, pending} {
		if st := a.Do("GET", "/threads/"+th+"/runs/"+id, nil).Map()["status"]; st != "interrupted" {
			t.Fatalf("run %s right after cancel: %v", id, st)
		}
	}
	if r := a.Do("GET", "/threads/"+th+"/runs/"+running+"/join", nil); r.Status != 200 {
		t.Fatalf("join: %d %s", r.Status, r.Body)
	}
	if r := a.Do("POST", "/runs/cancel", map[string]any{"thread_id": th, "run_ids": []string{running}}); r.Status != 404 {
		t.Fatalf("cancel of ended runs: %d %s", r.Status, r.Body)
	}

	// Rollback by ids: a pending run is deleted.
	running = a.Do("POST", "/threads/"+th+"/runs", runBody("slow", 30, "")).Map()["run_id"].(string)
	pending = a.Do("POST", "/threads/"+th+"/runs", runBody("queued", 0, "enqueue")).Map()["run_id"].(string)
	if r := a.Do("POST", "/runs/cancel?action=rollback", map[string]any{"thread_id": th, "run_ids": []string{pending, running}}); r.Status != 204 {
		t.Fatalf("rollback: %d %s", r.Status, r.Body)
	}
	if r := a.Do("GET", "/threads/"+th+"/runs/"+pending, nil); r.Status != 404 {
		t.Fatalf("rolled-back pending run: %d %s", r.Status, r.Body)
	}
	// A running run reads interrupted until it has unwound, then is gone
	// (the echo graph unwinds at once).
	if r := a.Do("GET", "/threads/"+th+"/runs/"+running, nil); r.Status != 404 && r.Map()["status"] != "interrupted" {
		t.Fatalf("rolled-back running run right after cancel: %d %s", r.Status, r.Body)
	}

	for _, tc := range []struct {
		name, query string
		body        map[string]any
		status      int
	}{
		{"unknown status", "", map[string]any{"status": "done"}, 422},
		{"status with ids", "", map[string]any{"status": "all", "thread_id": th}, 422},
		{"neither", "", map[string]any{}, 422},
		{"thread without runs", "", map[string]any{"thread_id": th}, 422},
		{"bad thread id", "", map[string]any{"thread_id": "x", "run_ids": []string{running}}, 422},
		{"bad run id", "", map[string]any{"thread_id": th, "run_ids": []string{"x"}}, 422},
		{"bad action", "?action=stop", map[string]any{"status": "all"}, 422},
		{"unknown run", "", map[string]any{"thread_id": th, "run_ids": []string{"0f0e0d0c-0b0a-4908-8706-050403020100"}}, 404},
		{"nothing pending", "", map[string]any{"status": "pending"}, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := a.Do("POST", "/runs/cancel"+tc.query, tc.body)
			if r.Status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.status, r.Body)
			}
			if _, ok := r.Map()["detail"]; !ok {
				t.Fatalf("no detail: %s", r.Body)
			}
		})
	}
}

// TestStateOfAThreadWithoutCheckpoints: a thread that never ran answers
// its state with checkpoint, metadata and created_at null, as the
// reference servers do; once it has run, they name its checkpoint.
func TestStateOfAThreadWithoutCheckpoints(t *testing.T) {
	a := echoAPI(t)
	th := a.Do("POST", "/threads", map[string]any{}).Map()["thread_id"].(string)
	st := a.Do("GET", "/threads/"+th+"/state", nil).Map()
	for _, k := range []string{"checkpoint", "metadata", "created_at", "parent_checkpoint"} {
		if v, ok := st[k]; !ok || v != nil {
			t.Errorf("%s = %v (present %v), want null", k, v, ok)
		}
	}
	if v, ok := st["values"].(map[string]any); !ok || len(v) != 0 {
		t.Errorf("values %v, want {}", st["values"])
	}
	if r := a.Do("POST", "/threads/"+th+"/runs/wait", map[string]any{"assistant_id": "echo",
		"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}}); r.Status != 200 {
		t.Fatalf("run: %d %s", r.Status, r.Body)
	}
	st = a.Do("GET", "/threads/"+th+"/state", nil).Map()
	cp, _ := st["checkpoint"].(map[string]any)
	id, _ := cp["checkpoint_id"].(string)
	if id == "" || st["created_at"] == nil || st["metadata"] == nil {
		t.Fatalf("after a run: checkpoint %v, created_at %v, metadata %v", st["checkpoint"], st["created_at"], st["metadata"])
	}
	if at := a.Do("GET", "/threads/"+th+"/state/"+id, nil).Map(); at["checkpoint"].(map[string]any)["checkpoint_id"] != id {
		t.Fatalf("state at the checkpoint: %v", at["checkpoint"])
	}
}
