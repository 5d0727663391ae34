package agentapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"slipway/runtime/agent"
	"slipway/runtime/agent/agentapi"
	"slipway/storage"
)

// TestWaitSendsHeartbeats: /runs/wait says where the result can be had
// again (Location: .../join) and, while the run goes on, sends newlines
// that keep proxies from closing the connection; the body is still one
// JSON document for any parser.
func TestWaitSendsHeartbeats(t *testing.T) {
	db, err := storage.Open(filepath.Join(t.TempDir(), "agent.db"), time.Second, agent.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	eng := &agent.Engine{DB: db, Graphs: map[string]agent.Graph{"echo": agent.Echo{}}, Workers: 4, Timeout: time.Minute, Log: zerolog.Nop()}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&agentapi.API{Engine: eng, MaxBody: 1 << 20, WaitHeartbeat: 100 * time.Millisecond}).Handler())
	t.Cleanup(func() {
		srv.Close()
		stop()
		eng.Wait()
		db.Close()
	})
	th, err := http.Post(srv.URL+"/threads", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	var thread struct {
		ThreadID string `json:"thread_id"`
	}
	_ = json.NewDecoder(th.Body).Decode(&thread)
	th.Body.Close()
	resp, err := http.Post(srv.URL+"/threads/"+thread.ThreadID+"/runs/wait", "application/json",
		strings.NewReader(`{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"slow"}],"sleep":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	loc := resp.Header.Get("Location")
	if !strings.HasPrefix(loc, "/threads/") || !strings.HasSuffix(loc, "/join") {
		t.Fatalf("Location %q, want /threads/{thread_id}/runs/{run_id}/join", loc)
	}
	if beats := len(body) - len(bytes.TrimLeft(body, "\n")); beats < 3 {
		t.Fatalf("%d heartbeat newlines in a 1 s wait at 100 ms, want several: %q", beats, body)
	}
	var out struct {
		Messages []struct{ Content string } `json:"messages"`
	}
	if err := json.Unmarshal(body, &out); err != nil || len(out.Messages) == 0 || out.Messages[len(out.Messages)-1].Content != "slow" {
		t.Fatalf("body %q: %v", body, err)
	}
	// The Location answers with the same result (a stateless run's thread
	// goes with the run, as on the reference).
	j, err := http.Get(srv.URL + loc)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Body.Close()
	if j.StatusCode != 200 {
		t.Fatalf("GET %s: %d", loc, j.StatusCode)
	}
}
