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

// valuesGraph streams the given values chunks, then stops at an
// interrupt when interrupt is set.
type valuesGraph struct {
	chunks    []map[string]any
	interrupt bool
}

func (g valuesGraph) Run(_ context.Context, _ agent.Request, emit func(string, map[string]any, []agent.Event) error) error {
	var evs []agent.Event
	for _, c := range g.chunks {
		evs = append(evs, agent.Event{Mode: "values", Data: c})
	}
	if g.interrupt {
		evs = append(evs, agent.Event{Mode: "__interrupt__", Data: "approve?"})
	}
	return emit("", nil, evs)
}

// TestWaitAnswersTheInterrupt: /wait of a run that stopped at an interrupt
// answers the values carrying it, not a later values chunk (what LangGraph
// Python streams after a Command with goto sent to an interrupted thread),
// as the Python reference does; a run that moved past an interrupt
// answers its last values. (Graphs of the JavaScript host answer their last
// values as the JS reference does: TestJSHostMatchesReference.)
func TestWaitAnswersTheInterrupt(t *testing.T) {
	db, err := storage.Open(filepath.Join(t.TempDir(), "agent.db"), time.Second, agent.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	pending := map[string]any{"log": []any{"a"}, "__interrupt__": []any{map[string]any{"id": "i1", "value": "approve?"}}}
	later := map[string]any{"log": []any{"a", "b"}}
	ctx, stop := context.WithCancel(context.Background())
	eng := &agent.Engine{DB: db, Graphs: map[string]agent.Graph{
		"stopped":  valuesGraph{chunks: []map[string]any{pending, later}, interrupt: true},
		"moved_on": valuesGraph{chunks: []map[string]any{pending, later}},
	}, Workers: 1, Timeout: time.Minute, Log: zerolog.Nop()}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&agentapi.API{Engine: eng, MaxBody: 1 << 20}).Handler())
	t.Cleanup(func() { srv.Close(); stop(); eng.Wait(); db.Close() })
	a := inProcess{t: t, url: srv.URL}

	for _, tc := range []struct {
		graph string
		want  map[string]any
	}{
		{"stopped", pending},
		{"moved_on", later},
	} {
		thread := a.Do("POST", "/threads", map[string]any{}).Map()["thread_id"].(string)
		r := a.Do("POST", "/threads/"+thread+"/runs/wait", map[string]any{"assistant_id": tc.graph, "input": map[string]any{}})
		got, _ := json.Marshal(r.Map())
		want, _ := json.Marshal(tc.want)
		if r.Status != 200 || string(got) != string(want) {
			t.Errorf("%s: %d %s, want %s", tc.graph, r.Status, got, want)
		}
	}
}
