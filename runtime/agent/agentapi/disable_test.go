package agentapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"slipway/server/servertest"
)

// TestDisabledRouteGroups: a project's http.disable_* keys (the
// reference's) turn off their groups of the agent API, a thread's runs
// with "runs"; /ok and the groups left on are served.
func TestDisabledRouteGroups(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "langgraph.json")
	if err := os.WriteFile(cfg, []byte(`{"graphs": {"echo": {"builtin": "echo"}},
		"http": {"disable_runs": true, "disable_meta": true, "disable_store": true}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	a := servertest.StartAgent(t, map[string]string{"SLIPWAY_GRAPH_CONFIG": cfg})
	// Plain requests: with the meta group off there is no /openapi.json
	// for servertest's checks to read.
	do := func(method, path, body string) (int, string) {
		req, err := http.NewRequest(method, a.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	status, raw := do("POST", "/threads", "{}")
	var thread struct {
		ID string `json:"thread_id"`
	}
	if err := json.Unmarshal([]byte(raw), &thread); status != 200 || err != nil {
		t.Fatalf("create thread: %d %s", status, raw)
	}
	run := `{"assistant_id": "echo", "input": {"messages": []}}`
	for _, c := range []struct {
		method, path, body string
		want               int
	}{
		{"GET", "/ok", "", 200},
		{"GET", "/threads/" + thread.ID, "", 200},
		{"POST", "/assistants/search", "{}", 200},
		{"GET", "/info", "", 404},
		{"GET", "/docs", "", 404},
		{"GET", "/openapi.json", "", 404},
		{"POST", "/runs/wait", run, 404},
		{"POST", "/threads/" + thread.ID + "/runs/wait", run, 404},
		{"GET", "/threads/" + thread.ID + "/runs", "", 404},
		{"POST", "/runs/crons/search", "{}", 404},
		{"POST", "/store/items/search", "{}", 404},
	} {
		status, raw := do(c.method, c.path, c.body)
		if status != c.want {
			t.Errorf("%s %s: %d %s; want %d", c.method, c.path, status, raw, c.want)
		}
		if c.want == 404 && strings.TrimSpace(raw) != `{"detail":"Not Found"}` {
			t.Errorf("%s %s: %s; want the API's 404", c.method, c.path, raw)
		}
	}
}
