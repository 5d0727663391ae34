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
	bolt "go.etcd.io/bbolt"

	"slipway/runtime/agent"
	"slipway/runtime/agent/agentapi"
	"slipway/server/servertest"
	"slipway/storage"
)

// inProcess sends requests to an API served in the test process.
type inProcess struct {
	t   *testing.T
	url string
}

func (a inProcess) Do(method, path string, body any) *servertest.Response {
	a.t.Helper()
	return servertest.Do(a.t, method, a.url+path, body)
}

// TestCronsHTTP drives the cron routes in process: create (stateless and
// on a thread), get, search with filters, sort and select, count,
// update, delete, the errors' shapes, and a fire on the engine's clock.
func TestCronsHTTP(t *testing.T) {
	db, err := storage.Open(filepath.Join(t.TempDir(), "agent.db"), time.Second, agent.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		now = time.Date(2026, 1, 15, 10, 1, 0, 0, time.UTC)
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	ctx, stop := context.WithCancel(context.Background())
	eng := &agent.Engine{DB: db, Graphs: map[string]agent.Graph{"echo": agent.Echo{}}, Workers: 2, Timeout: time.Minute,
		Log: zerolog.Nop(), Clock: clock, CronTick: time.Hour}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&agentapi.API{Engine: eng, MaxBody: 1 << 20}).Handler())
	t.Cleanup(func() { srv.Close(); stop(); eng.Wait(); db.Close() })
	a := inProcess{t: t, url: srv.URL}

	if f := a.Do("GET", "/info", nil).Map()["flags"].(map[string]any); f["crons"] != true {
		t.Fatalf("info flags: %v", f)
	}
	thread := a.Do("POST", "/threads", map[string]any{}).Map()["thread_id"].(string)
	in := map[string]any{"messages": []any{map[string]any{"role": "user", "content": "tick"}}}
	r := a.Do("POST", "/threads/"+thread+"/runs/crons", map[string]any{"assistant_id": "echo", "schedule": "*/5 * * * *",
		"input": in, "metadata": map[string]any{"team": "a"}})
	if r.Status != 200 {
		t.Fatalf("create thread cron: %d %s", r.Status, r.Body)
	}
	tc := r.Map()
	if tc["thread_id"] != thread || tc["next_run_date"] != "2026-01-15T10:05:00Z" || tc["enabled"] != true ||
		tc["on_run_completed"] != nil || tc["assistant_id"] != agent.AssistantID("echo") || tc["timezone"] != nil {
		t.Fatalf("thread cron: %s", r.Body)
	}
	if cf := tc["payload"].(map[string]any)["config"].(map[string]any)["configurable"].(map[string]any); cf["cron_id"] != tc["cron_id"] {
		t.Fatalf("payload config: %s", r.Body)
	}
	r = a.Do("POST", "/runs/crons", map[string]any{"assistant_id": "echo", "schedule": "0 9 * * *", "timezone": "Europe/Paris",
		"enabled": false, "end_time": "2027-01-01T00:00:00Z"})
	sc := r.Map()
	if r.Status != 200 || sc["thread_id"] != nil || sc["on_run_completed"] != "delete" || sc["timezone"] != "Europe/Paris" ||
		sc["next_run_date"] != "2026-01-16T08:00:00Z" || sc["enabled"] != false || sc["end_time"] != "2027-01-01T00:00:00Z" {
		t.Fatalf("stateless cron: %d %s", r.Status, r.Body)
	}
	tcID, scID := tc["cron_id"].(string), sc["cron_id"].(string)

	for _, c := range []struct {
		name, method, path string
		body               any
		status             int
		detail             string
	}{
		{"bad schedule", "POST", "/runs/crons", map[string]any{"assistant_id": "echo", "schedule": "every minute"}, 422, "Invalid cron schedule"},
		{"no schedule", "POST", "/runs/crons", map[string]any{"assistant_id": "echo"}, 422, "schedule is required"},
		{"bad zone", "POST", "/runs/crons", map[string]any{"assistant_id": "echo", "schedule": "* * * * *", "timezone": "Nowhere/Land"}, 422, "Invalid timezone"},
		{"no assistant", "POST", "/runs/crons", map[string]any{"assistant_id": "nope", "schedule": "* * * * *"}, 404, "Assistant nope not found"},
		{"no thread", "POST", "/threads/00000000-0000-0000-0000-000000000001/runs/crons", map[string]any{"assistant_id": "echo", "schedule": "* * * * *"}, 404, "not found"},
		{"bad on_run_completed", "POST", "/runs/crons", map[string]any{"assistant_id": "echo", "schedule": "* * * * *", "on_run_completed": "later"}, 422, "on_run_completed"},
		{"bad sort", "POST", "/runs/crons/search", map[string]any{"sort_by": "schedule"}, 422, "Invalid sort_by field"},
		{"bad select", "POST", "/runs/crons/search", map[string]any{"select": []string{"secret"}}, 422, "Invalid select field"},
		{"get unknown", "GET", "/runs/crons/00000000-0000-0000-0000-000000000002", nil, 404, "not found"},
		{"bad id", "DELETE", "/runs/crons/xyz", nil, 422, "UUID"},
		{"empty update", "PATCH", "/runs/crons/" + tcID, map[string]any{}, 400, "empty"},
		{"bad update schedule", "PATCH", "/runs/crons/" + tcID, map[string]any{"schedule": "61 * * * *"}, 422, "Invalid cron schedule"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := a.Do(c.method, c.path, c.body)
			if r.Status != c.status || !strings.Contains(string(r.Body), c.detail) {
				t.Fatalf("%d %s, want %d with %q", r.Status, r.Body, c.status, c.detail)
			}
		})
	}

	search := func(body map[string]any) []map[string]any {
		t.Helper()
		r := a.Do("POST", "/runs/crons/search", body)
		if r.Status != 200 {
			t.Fatalf("search %v: %d %s", body, r.Status, r.Body)
		}
		var out []map[string]any
		if err := json.Unmarshal(r.Body, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if l := search(nil); len(l) != 2 || l[0]["cron_id"] != scID {
		t.Fatalf("search all (newest first): %v", l)
	}
	if l := search(map[string]any{"thread_id": thread}); len(l) != 1 || l[0]["cron_id"] != tcID {
		t.Fatalf("search by thread: %v", l)
	}
	if l := search(map[string]any{"enabled": false, "select": []string{"cron_id", "enabled"}}); len(l) != 1 || len(l[0]) != 2 || l[0]["cron_id"] != scID {
		t.Fatalf("search disabled, selected: %v", l)
	}
	if l := search(map[string]any{"sort_by": "next_run_date", "sort_order": "asc"}); len(l) != 2 || l[0]["cron_id"] != tcID {
		t.Fatalf("search by next_run_date: %v", l)
	}
	if r := a.Do("POST", "/runs/crons/count", map[string]any{"assistant_id": agent.AssistantID("echo")}); r.Status != 200 || strings.TrimSpace(string(r.Body)) != "2" {
		t.Fatalf("count: %d %s", r.Status, r.Body)
	}

	r = a.Do("PATCH", "/runs/crons/"+scID, map[string]any{"enabled": true, "end_time": nil, "timezone": "Asia/Tokyo",
		"input": in, "metadata": map[string]any{"v": 2}})
	up := r.Map()
	if r.Status != 200 || up["enabled"] != true || up["end_time"] != nil || up["next_run_date"] != "2026-01-16T00:00:00Z" ||
		up["payload"].(map[string]any)["input"] == nil || up["metadata"].(map[string]any)["v"] != 2.0 || up["schedule"] != "0 9 * * *" {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	// As the reference: the whole patch is merged into the payload.
	if pl := up["payload"].(map[string]any); pl["enabled"] != true || pl["timezone"] != "Asia/Tokyo" {
		t.Fatalf("update's payload: %v", pl)
	}

	// The thread cron's date comes: one run on its thread.
	mu.Lock()
	now = time.Date(2026, 1, 15, 10, 5, 0, 0, time.UTC)
	mu.Unlock()
	if n := eng.FireDueCrons(); n != 1 {
		t.Fatalf("fired %d", n)
	}
	runs := a.Do("GET", "/threads/"+thread+"/runs", nil)
	var list []map[string]any
	_ = json.Unmarshal(runs.Body, &list)
	if len(list) != 1 {
		t.Fatalf("runs: %s", runs.Body)
	}
	if r := a.Do("GET", "/threads/"+thread+"/runs/"+list[0]["run_id"].(string)+"/join", nil); r.Status != 200 {
		t.Fatalf("join: %d %s", r.Status, r.Body)
	}
	if got := a.Do("GET", "/runs/crons/"+tcID, nil).Map(); got["next_run_date"] != "2026-01-15T10:10:00Z" {
		t.Fatalf("after the fire: %v", got)
	}

	if r := a.Do("DELETE", "/runs/crons/"+tcID, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if r := a.Do("DELETE", "/runs/crons/"+tcID, nil); r.Status != 404 {
		t.Fatalf("delete again: %d %s", r.Status, r.Body)
	}
	mu.Lock()
	now = time.Date(2026, 1, 15, 10, 10, 0, 0, time.UTC)
	mu.Unlock()
	if n := eng.FireDueCrons(); n != 0 {
		t.Fatalf("a deleted cron fired (%d)", n)
	}
}

// TestCronSurvivesKill runs a real `slipway agent`: a cron whose date
// passed while the agent was down (several dates, in fact) fires once at
// start; the agent is killed with SIGKILL right after, and when it comes
// back the fire is neither lost (the run is there) nor repeated (one run,
// and the next date is in the future).
func TestCronSurvivesKill(t *testing.T) {
	a := servertest.StartAgent(t, map[string]string{"SLIPWAY_LOG_LEVEL": "warn"})
	thread := newThread(t, a)
	// Yearly: while the agent is down its date is moved three years
	// back, so three dates are missed, and the next comes only next year.
	r := a.Do("POST", "/threads/"+thread+"/runs/crons", map[string]any{"assistant_id": "echo", "schedule": "0 0 1 1 *",
		"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "tick"}}}})
	if r.Status != 200 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	id := r.Map()["cron_id"].(string)
	a.Kill()

	path := filepath.Join(a.DataDir, "agent.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("crons"))
		var c map[string]any
		if err := json.Unmarshal(b.Get([]byte(id)), &c); err != nil {
			return err
		}
		c["next_run_date"] = time.Now().UTC().AddDate(-3, 0, 0).Format(time.RFC3339Nano)
		raw, _ := json.Marshal(c)
		return b.Put([]byte(id), raw)
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	runs := func() []map[string]any {
		t.Helper()
		r := a.Do("GET", "/threads/"+thread+"/runs", nil)
		var list []map[string]any
		if r.Status != 200 || json.Unmarshal(r.Body, &list) != nil {
			t.Fatalf("runs: %d %s", r.Status, r.Body)
		}
		return list
	}
	a.Restart()
	deadline := time.Now().Add(20 * time.Second)
	for len(runs()) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the overdue cron did not fire:\n%s", a.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	a.Kill()
	a.Restart()
	list := runs()
	next, _ := time.Parse(time.RFC3339, a.Do("GET", "/runs/crons/"+id, nil).Map()["next_run_date"].(string))
	if len(list) != 1 || !next.After(time.Now()) {
		t.Fatalf("after the kill: %d runs (want 1), next %v:\n%s", len(list), next, a.Logs())
	}
}
