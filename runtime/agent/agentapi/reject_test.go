package agentapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"slipway/runtime/agent"
	"slipway/runtime/agent/agentapi"
	"slipway/server/servertest"
	"slipway/storage"
)

// TestRejectIsAtomic fires 50 concurrent reject runs at a busy thread and
// at an idle one, 20 times, at a real `slipway agent` process: none is
// accepted on the busy thread, exactly one on the idle thread.
func TestRejectIsAtomic(t *testing.T) {
	a := servertest.StartAgent(t, map[string]string{"SLIPWAY_LOG_LEVEL": "warn", "SLIPWAY_AGENT_WORKERS": "64"})
	rejectRounds(t, a.URL)
}

// TestRejectIsAtomicInProcess is the same against the API served in the
// test process: the agent binary is built without the race detector, so
// only here does -race watch the admission code itself.
func TestRejectIsAtomicInProcess(t *testing.T) {
	db, err := storage.Open(filepath.Join(t.TempDir(), "agent.db"), time.Second, agent.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	eng := &agent.Engine{DB: db, Graphs: map[string]agent.Graph{"echo": agent.Echo{}}, Workers: 64, Timeout: time.Minute, Log: zerolog.Nop()}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&agentapi.API{Engine: eng, MaxBody: 1 << 20}).Handler())
	t.Cleanup(func() {
		srv.Close()
		stop() // ends the sleeping runs
		eng.Wait()
		db.Close()
	})
	rejectRounds(t, srv.URL)
}

func rejectRounds(t *testing.T, url string) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
	do := func(path, body string) (int, map[string]any) {
		resp, err := client.Post(url+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	fire := func(thread string) (accepted, rejected int) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := 0; i < 50; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				// Slow runs: "exactly one on an idle thread" needs the accepted
				// run to still be running when the others arrive.
				body := fmt.Sprintf(`{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"r%d"}],"sleep":2},"multitask_strategy":"reject"}`, i)
				resp, err := client.Post(url+"/threads/"+thread+"/runs", "application/json", strings.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				mu.Lock()
				defer mu.Unlock()
				switch resp.StatusCode {
				case 200:
					accepted++
				case 409:
					rejected++
				default:
					t.Errorf("status %d", resp.StatusCode)
				}
			}(i)
		}
		wg.Wait()
		return
	}
	newThread := func() string {
		st, m := do("/threads", "{}")
		if st != 200 {
			t.Fatalf("create thread: %d %v", st, m)
		}
		return m["thread_id"].(string)
	}
	for round := 0; round < 20; round++ {
		busy := newThread()
		if st, m := do("/threads/"+busy+"/runs", `{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"slow"}],"sleep":2}}`); st != 200 {
			t.Fatalf("first run: %d %v", st, m)
		}
		if acc, rej := fire(busy); acc != 0 || rej != 50 {
			t.Fatalf("round %d busy thread: %d accepted, %d rejected", round, acc, rej)
		}
		idle := newThread()
		if acc, rej := fire(idle); acc != 1 || rej != 49 {
			t.Fatalf("round %d idle thread: %d accepted, %d rejected", round, acc, rej)
		}
	}
}

// TestRejectScenario is the spec's scenario: the refused run changes
// nothing and the first run finishes with exactly its own messages.
func TestRejectScenario(t *testing.T) {
	a := servertest.StartAgent(t, nil)
	th := newThread(t, a)
	first := a.Do("POST", "/threads/"+th+"/runs", runBody("hello", 1, ""))
	if first.Status != 200 || !strings.HasPrefix(first.Header.Get("Content-Location"), "/threads/"+th+"/runs/") {
		t.Fatalf("first: %d %v", first.Status, first.Header)
	}
	r := a.Do("POST", "/threads/"+th+"/runs", runBody("second", 0, "reject"))
	if r.Status != 409 || r.Map()["detail"] != "Thread is already running a task. Wait for it to finish or choose a different multitask strategy." {
		t.Fatalf("second: %d %s", r.Status, r.Body)
	}
	rid := first.Map()["run_id"].(string)
	j := a.Do("GET", "/threads/"+th+"/runs/"+rid+"/join", nil)
	if j.Status != 200 {
		t.Fatalf("join: %d %s", j.Status, j.Body)
	}
	ms := messages(t, a, th)
	if len(ms) != 2 || ms[0]["type"] != "human" || ms[0]["content"] != "hello" || ms[1]["type"] != "ai" || ms[1]["content"] != "hello" {
		t.Fatalf("state: %v", ms)
	}
	if got := a.Do("GET", "/threads/"+th+"/runs/"+rid, nil).Map()["status"]; got != "success" {
		t.Fatalf("first run status %v", got)
	}
	if runs := a.Do("GET", "/threads/"+th+"/runs", nil).JSON().([]any); len(runs) != 1 {
		t.Fatalf("%d runs recorded, want 1", len(runs))
	}
}
