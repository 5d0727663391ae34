package agentapi_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"slipway/runtime/agent"
	"slipway/runtime/agent/agentapi"
	"slipway/storage"
)

// laterValues streams what LangGraph Python streams for a Command with
// goto sent to an interrupted thread: the values with the interrupt, then
// values with the goto node's (uncheckpointed) write.
type laterValues struct{}

func (laterValues) Run(_ context.Context, _ agent.Request, emit func(string, map[string]any, []agent.Event) error) error {
	return emit("", nil, []agent.Event{
		{Mode: "values", Data: map[string]any{"log": []any{"a"}, "__interrupt__": []any{map[string]any{"id": "i1", "value": "approve?"}}}},
		{Mode: "values", Data: map[string]any{"log": []any{"a", "b"}}},
	})
}

// TestWaitAnswersTheInterrupt: /runs/wait of a run that stopped at an
// interrupt answers the values carrying it, not a later values chunk, as
// the reference server does.
func TestWaitAnswersTheInterrupt(t *testing.T) {
	db, err := storage.Open(filepath.Join(t.TempDir(), "agent.db"), time.Second, agent.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	eng := &agent.Engine{DB: db, Graphs: map[string]agent.Graph{"later": laterValues{}, "echo": agent.Echo{}}, Workers: 1,
		Timeout: time.Minute, Log: zerolog.Nop()}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&agentapi.API{Engine: eng, MaxBody: 1 << 20}).Handler())
	t.Cleanup(func() { srv.Close(); stop(); eng.Wait(); db.Close() })
	a := inProcess{t: t, url: srv.URL}

	for _, tc := range []struct {
		graph, want string
	}{
		{"later", `{"__interrupt__":[{"id":"i1","value":"approve?"}],"log":["a"]}`},
		{"echo", `{"messages":[{"content":"hi","type":"human"},{"content":"hi","type":"ai"}]}`},
	} {
		r := a.Do("POST", "/runs/wait", map[string]any{"assistant_id": tc.graph, "input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}})
		var got map[string]any
		if err := json.Unmarshal(r.Body, &got); err != nil {
			t.Fatalf("%s: %d %s", tc.graph, r.Status, r.Body)
		}
		// Compare only what the case names (messages carry ids).
		var want map[string]any
		_ = json.Unmarshal([]byte(tc.want), &want)
		for k := range want {
			if k == "messages" {
				if msgs, _ := got[k].([]any); len(msgs) != 2 {
					t.Errorf("%s: messages %v", tc.graph, got[k])
				}
				continue
			}
			gj, _ := json.Marshal(got[k])
			wj, _ := json.Marshal(want[k])
			if string(gj) != string(wj) {
				t.Errorf("%s: %s = %s, want %s", tc.graph, k, gj, wj)
			}
		}
		if tc.graph == "later" && len(got) != 2 {
			t.Errorf("later: %s", r.Body)
		}
	}
}
