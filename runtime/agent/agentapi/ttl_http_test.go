package agentapi_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"slipway/runtime/agent"
	"slipway/runtime/agent/agentapi"
	"slipway/storage"
)

// ttlServer serves an engine with a default TTL and a settable clock in
// process; its sweeper never ticks by itself (the tests call SweepTTL).
func ttlServer(t *testing.T, cfg agent.TTLConfig) (inProcess, *agent.Engine, func(time.Duration)) {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "agent.db"), time.Second, agent.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		now = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	ctx, stop := context.WithCancel(context.Background())
	eng := &agent.Engine{DB: db, Graphs: map[string]agent.Graph{"echo": agent.Echo{}}, Workers: 2, Timeout: time.Minute,
		Log: zerolog.Nop(), Clock: clock, CronTick: time.Hour, TTLTick: time.Hour, TTL: cfg}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&agentapi.API{Engine: eng, MaxBody: 1 << 20}).Handler())
	t.Cleanup(func() { srv.Close(); stop(); eng.Wait(); db.Close() })
	return inProcess{t: t, url: srv.URL}, eng, advance
}

// TestThreadTTLHTTP: the ttl shapes of POST and PATCH /threads (and their
// 422s), GET ?include=ttl, the default TTL, and a sweep seen over HTTP.
func TestThreadTTLHTTP(t *testing.T) {
	a, eng, advance := ttlServer(t, agent.TTLConfig{Strategy: agent.TTLKeepLatest, DefaultTTL: 60})

	for _, c := range []struct {
		name, method, path string
		body               any
		loc                []any
		typ                string
	}{
		{"ttl a number", "POST", "/threads", map[string]any{"ttl": 5}, []any{"body", "ttl"}, "dict_type"},
		{"ttl a string", "POST", "/threads", map[string]any{"ttl": "5m"}, []any{"body", "ttl"}, "dict_type"},
		{"ttl minutes missing", "POST", "/threads", map[string]any{"ttl": map[string]any{"strategy": "delete"}}, []any{"body", "ttl", "ttl"}, "missing"},
		{"ttl minutes a string", "POST", "/threads", map[string]any{"ttl": map[string]any{"ttl": "10"}}, []any{"body", "ttl", "ttl"}, "float_type"},
		{"ttl zero", "POST", "/threads", map[string]any{"ttl": map[string]any{"ttl": 0}}, []any{"body", "ttl", "ttl"}, "value_error"},
		{"ttl negative", "POST", "/threads", map[string]any{"ttl": map[string]any{"ttl": -1}}, []any{"body", "ttl", "ttl"}, "value_error"},
		{"ttl too long", "POST", "/threads", map[string]any{"ttl": map[string]any{"ttl": 1e15}}, []any{"body", "ttl", "ttl"}, "value_error"},
		{"bad strategy", "POST", "/threads", map[string]any{"ttl": map[string]any{"ttl": 5, "strategy": "archive"}}, []any{"body", "ttl", "strategy"}, "literal_error"},
		{"patch bad strategy", "PATCH", "/threads/00000000-0000-0000-0000-000000000001", map[string]any{"ttl": map[string]any{"ttl": 5, "strategy": 3}}, []any{"body", "ttl", "strategy"}, "literal_error"},
		{"patch ttl a list", "PATCH", "/threads/00000000-0000-0000-0000-000000000001", map[string]any{"ttl": []any{5}}, []any{"body", "ttl"}, "dict_type"},
		{"prune without ids", "POST", "/threads/prune", map[string]any{"strategy": "delete"}, []any{"body", "thread_ids"}, "missing"},
		{"prune bad id", "POST", "/threads/prune", map[string]any{"thread_ids": []any{"not-a-uuid"}}, []any{"body", "thread_ids", 0.0}, "uuid_parsing"},
		{"prune bad strategy", "POST", "/threads/prune", map[string]any{"thread_ids": []any{}, "strategy": "archive"}, []any{"body", "strategy"}, "literal_error"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := a.Do(c.method, c.path, c.body)
			var e struct {
				Detail []struct {
					Loc  []any  `json:"loc"`
					Msg  string `json:"msg"`
					Type string `json:"type"`
				} `json:"detail"`
			}
			if r.Status != 422 || json.Unmarshal(r.Body, &e) != nil || len(e.Detail) != 1 || e.Detail[0].Type != c.typ ||
				e.Detail[0].Msg == "" || !jsonEqual(e.Detail[0].Loc, c.loc) {
				t.Fatalf("%d %s, want 422 at %v (%s)", r.Status, r.Body, c.loc, c.typ)
			}
		})
	}
	if n, _, _ := eng.SearchThreads(agent.ThreadFilter{}); len(n) != 0 {
		t.Fatalf("a refused request created threads: %v", n)
	}

	// A thread with its own TTL; one with the default; include=ttl shows them.
	own := a.Do("POST", "/threads", map[string]any{"ttl": map[string]any{"ttl": 10, "strategy": "delete"}})
	if own.Status != 200 || own.Map()["ttl"] != nil {
		t.Fatalf("create with ttl: %d %s", own.Status, own.Body)
	}
	ownID := own.Map()["thread_id"].(string)
	dflt := a.Do("POST", "/threads", map[string]any{}).Map()["thread_id"].(string)
	for _, c := range []struct {
		id, query string
		want      map[string]any
	}{
		{ownID, "?include=ttl", map[string]any{"strategy": "delete", "ttl_minutes": 10.0, "expires_at": "2026-03-01T10:10:00Z"}},
		{dflt, "?include=ttl", map[string]any{"strategy": "keep_latest", "ttl_minutes": 60.0, "expires_at": "2026-03-01T11:00:00Z"}},
		{dflt, "?include=metadata,ttl", map[string]any{"strategy": "keep_latest", "ttl_minutes": 60.0, "expires_at": "2026-03-01T11:00:00Z"}},
		{ownID, "", nil},
	} {
		r := a.Do("GET", "/threads/"+c.id+c.query, nil)
		got, has := r.Map()["ttl"]
		if r.Status != 200 || has != (c.want != nil) || c.want != nil && !jsonEqual(got, c.want) {
			t.Fatalf("GET %s%s: %d %s, want ttl %v", c.id, c.query, r.Status, r.Body, c.want)
		}
	}

	// A patch sets a new TTL from now; without ttl it keeps the TTL, and
	// moves the expiry (the thread was updated).
	advance(5 * time.Minute)
	r := a.Do("PATCH", "/threads/"+ownID, map[string]any{"metadata": map[string]any{"k": "v"}, "ttl": map[string]any{"ttl": 30, "strategy": "keep_latest"}})
	if r.Status != 200 || r.Map()["metadata"].(map[string]any)["k"] != "v" {
		t.Fatalf("patch with ttl: %d %s", r.Status, r.Body)
	}
	if got := a.Do("GET", "/threads/"+ownID+"?include=ttl", nil).Map()["ttl"]; !jsonEqual(got, map[string]any{
		"strategy": "keep_latest", "ttl_minutes": 30.0, "expires_at": "2026-03-01T10:35:00Z"}) {
		t.Fatalf("ttl after patch: %v", got)
	}
	advance(5 * time.Minute)
	a.Do("PATCH", "/threads/"+ownID, map[string]any{"metadata": map[string]any{"k": "w"}})
	if got := a.Do("GET", "/threads/"+ownID+"?include=ttl", nil).Map()["ttl"].(map[string]any); got["expires_at"] != "2026-03-01T10:40:00Z" {
		t.Fatalf("ttl after a plain patch: %v", got)
	}
	if r := a.Do("PATCH", "/threads/00000000-0000-0000-0000-000000000001", map[string]any{"ttl": map[string]any{"ttl": 5}}); r.Status != 404 {
		t.Fatalf("patch ttl of an unknown thread: %d %s", r.Status, r.Body)
	}

	// A run on a new thread (if_not_exists=create) takes the default.
	runThread := "00000000-0000-4000-8000-000000000042"
	r = a.Do("POST", "/threads/"+runThread+"/runs/wait", map[string]any{"assistant_id": "echo", "if_not_exists": "create",
		"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}})
	if r.Status != 200 {
		t.Fatalf("run: %d %s", r.Status, r.Body)
	}
	if got := a.Do("GET", "/threads/"+runThread+"?include=ttl", nil).Map()["ttl"].(map[string]any); got["ttl_minutes"] != 60.0 {
		t.Fatalf("run-created thread's ttl: %v", got)
	}

	// Past every expiry: all three are keep_latest (the first one since
	// its patch), so all three stay, pruned.
	advance(2 * time.Hour)
	if n, err := eng.SweepTTL(); err != nil || n != 3 {
		t.Fatalf("sweep: %d %v, want 3", n, err)
	}
	for _, id := range []string{ownID, dflt, runThread} {
		if r := a.Do("GET", "/threads/"+id, nil); r.Status != 200 {
			t.Fatalf("keep_latest thread %s: %d %s", id, r.Status, r.Body)
		}
	}
	if h := a.Do("GET", "/threads/"+runThread+"/history", nil).JSON().([]any); len(h) != 1 {
		t.Fatalf("history after keep_latest: %d checkpoints", len(h))
	}
}

// TestPruneThreadsHTTP: POST /threads/prune deletes threads (as DELETE
// does) or keeps their latest checkpoint, counting those it pruned.
func TestPruneThreadsHTTP(t *testing.T) {
	a, _, _ := ttlServer(t, agent.TTLConfig{})
	var ids []string
	for range 3 {
		id := a.Do("POST", "/threads", map[string]any{}).Map()["thread_id"].(string)
		for _, text := range []string{"one", "two"} {
			r := a.Do("POST", "/threads/"+id+"/runs/wait", map[string]any{"assistant_id": "echo",
				"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": text}}}})
			if r.Status != 200 {
				t.Fatalf("run: %d %s", r.Status, r.Body)
			}
		}
		ids = append(ids, id)
	}
	for _, c := range []struct {
		name string
		body any
		want int
	}{
		{"empty list", map[string]any{"thread_ids": []any{}}, 0},
		{"keep_latest", map[string]any{"thread_ids": []any{ids[0]}, "strategy": "keep_latest"}, 1},
		{"delete by default, unknown skipped", map[string]any{"thread_ids": []any{ids[1], "00000000-0000-4000-8000-000000000009"}}, 1},
	} {
		r := a.Do("POST", "/threads/prune", c.body)
		if r.Status != 200 || !jsonEqual(r.JSON(), map[string]any{"pruned_count": float64(c.want)}) {
			t.Fatalf("%s: %d %s, want pruned_count %d", c.name, r.Status, r.Body, c.want)
		}
	}
	h := a.Do("GET", "/threads/"+ids[0]+"/history", nil).JSON().([]any)
	st := a.Do("GET", "/threads/"+ids[0]+"/state", nil).Map()
	if msgs := st["values"].(map[string]any)["messages"].([]any); len(h) != 1 || len(msgs) != 4 {
		t.Fatalf("kept thread: %d checkpoints, %d messages; want 1, 4", len(h), len(msgs))
	}
	if r := a.Do("GET", "/threads/"+ids[1], nil); r.Status != 404 {
		t.Fatalf("pruned thread: %d", r.Status)
	}
	if r := a.Do("GET", "/threads/"+ids[2]+"/history", nil); len(r.JSON().([]any)) < 2 {
		t.Fatalf("untouched thread lost history: %s", r.Body)
	}
	// search and count still answer on the same route.
	if r := a.Do("POST", "/threads/count", map[string]any{}); r.Status != 200 || !strings.Contains(string(r.Body), "2") {
		t.Fatalf("count: %d %s", r.Status, r.Body)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
