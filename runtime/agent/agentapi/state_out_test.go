package agentapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"slipway/runtime/agent"
	"slipway/storage"
)

// TestThreadStateHasTheModelsFields: the API's state names every field of
// the engine's, so a field added there is not lost here.
func TestThreadStateHasTheModelsFields(t *testing.T) {
	names := func(v any) []string {
		var out []string
		ty := reflect.TypeOf(v)
		for i := range ty.NumField() {
			out = append(out, strings.Split(ty.Field(i).Tag.Get("json"), ",")[0])
		}
		slices.Sort(out)
		return out
	}
	if m, api := names(agent.Checkpoint{}), names(threadState{}); !slices.Equal(m, api) {
		t.Fatalf("agent.Checkpoint's fields %v, threadState's %v", m, api)
	}
}

// TestStateOfAThreadWithoutCheckpoints: a thread that never ran answers
// its state with checkpoint, metadata and created_at null, as the
// reference servers do; once it has run, they name its checkpoint.
func TestStateOfAThreadWithoutCheckpoints(t *testing.T) {
	db, err := storage.Open(filepath.Join(t.TempDir(), "agent.db"), time.Second, agent.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	eng := &agent.Engine{DB: db, Graphs: map[string]agent.Graph{"echo": agent.Echo{}}, Workers: 4, Timeout: time.Minute, Log: zerolog.Nop()}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&API{Engine: eng, MaxBody: 1 << 20}).Handler())
	t.Cleanup(func() {
		srv.Close()
		stop()
		eng.Wait()
		db.Close()
	})
	do := func(method, path, body string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var out map[string]any
		if resp.StatusCode != 200 || json.Unmarshal(raw, &out) != nil {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
		}
		return out
	}
	th := do("POST", "/threads", `{}`)["thread_id"].(string)
	st := do("GET", "/threads/"+th+"/state", "")
	for _, k := range []string{"checkpoint", "metadata", "created_at", "parent_checkpoint"} {
		if v, ok := st[k]; !ok || v != nil {
			t.Errorf("%s = %v (present %v), want null", k, v, ok)
		}
	}
	if v, ok := st["values"].(map[string]any); !ok || len(v) != 0 {
		t.Errorf("values %v, want {}", st["values"])
	}
	do("POST", "/threads/"+th+"/runs/wait", `{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"hi"}]}}`)
	st = do("GET", "/threads/"+th+"/state", "")
	cp, _ := st["checkpoint"].(map[string]any)
	if id, _ := cp["checkpoint_id"].(string); id == "" || st["created_at"] == nil || st["metadata"] == nil {
		t.Fatalf("after a run: checkpoint %v, created_at %v, metadata %v", st["checkpoint"], st["created_at"], st["metadata"])
	}
	at := do("GET", "/threads/"+th+"/state/"+cp["checkpoint_id"].(string), "")
	if c, _ := at["checkpoint"].(map[string]any); c["checkpoint_id"] != cp["checkpoint_id"] {
		t.Fatalf("state at the checkpoint: %v", at["checkpoint"])
	}
}
