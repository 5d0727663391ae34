package agent

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func counterBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "counter")
	out, err := exec.Command("go", "build", "-o", bin, "../../testdata/graphs/counter").CombinedOutput()
	if err != nil {
		t.Fatalf("build counter: %v\n%s", err, out)
	}
	return bin
}

// TestCommandGraphProtocol runs the example command graph through the
// protocol: updates fold into the state, custom events pass through, a
// non-zero exit fails with stderr's tail, garbage fails clearly, and
// cancellation stops the process.
func TestCommandGraphProtocol(t *testing.T) {
	g := &Command{Argv: []string{counterBinary(t)}, Env: os.Environ(), Grace: time.Second}
	values := map[string]any{"count": 2.0, "messages": []any{map[string]any{"type": "human", "content": "héllo", "id": "m1"}}}
	run := func(ctx context.Context, input map[string]any) (map[string]any, []Event, error) {
		state := values
		var extra []Event
		err := g.Run(ctx, Request{Input: input, Values: values}, func(node string, up map[string]any, ev []Event) error {
			extra = append(extra, ev...)
			if up != nil {
				var err error
				state, err = ApplyUpdate(state, up)
				return err
			}
			return nil
		})
		return state, extra, err
	}
	state, extra, err := run(context.Background(), map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	ms := state["messages"].([]any)
	if state["count"] != 3.0 || len(ms) != 2 || ms[1].(map[string]any)["content"] != "5 characters" {
		t.Fatalf("state %v", state)
	}
	if len(extra) != 1 || extra[0].Mode != "custom" {
		t.Fatalf("events %v", extra)
	}
	if _, _, err := run(context.Background(), map[string]any{"fail": "the model is down"}); err == nil || !strings.Contains(err.Error(), "the model is down") {
		t.Fatalf("failing graph: %v", err)
	}
	if _, _, err := run(context.Background(), map[string]any{"garbage": true}); !errors.Is(err, ErrProtocol) {
		t.Fatalf("garbage: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, _, err := run(ctx, map[string]any{"sleep": 30.0}); err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("cancelled graph: %v after %v", err, time.Since(start))
	}
	// A program that ignores SIGTERM is killed once the grace period ends.
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, _, err = run(ctx, map[string]any{"sleep": 30.0, "stubborn": true})
	if took := time.Since(start); err == nil || took < g.Grace || took > g.Grace+3*time.Second {
		t.Fatalf("stubborn graph: %v after %v (grace %v)", err, took, g.Grace)
	}
}

func TestLoadGraphs(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "langgraph.json")
	_ = os.WriteFile(cfg, []byte(`{"graphs": {"agent": {"builtin": "echo"}, "py": "./agent.rb:graph", "cmd": {"command": ["./bin/counter"]}}}`), 0o600)
	graphs, warnings, err := LoadGraphs(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := graphs["agent"].(Echo); !ok {
		t.Fatal("builtin not loaded")
	}
	if _, ok := graphs["echo"]; ok || len(graphs) != 2 {
		t.Fatalf("graphs the file does not name are served: %v", graphs)
	}
	if graphs, _, _ := LoadGraphs("", nil); len(graphs) != 1 || graphs["echo"] == nil {
		t.Fatalf("without a file: %v, want echo alone", graphs)
	}
	if c, ok := graphs["cmd"].(*Command); !ok || c.Argv[0] != filepath.Join(dir, "bin/counter") {
		t.Fatalf("command graph: %#v", graphs["cmd"])
	}
	if _, ok := graphs["py"]; ok || len(warnings) != 1 || !strings.Contains(warnings[0], "language host") {
		t.Fatalf("path:attr graph: %v %v", graphs["py"], warnings)
	}
	_ = os.WriteFile(cfg, []byte(`{"graphs": {"x": {"builtin": "nope"}}}`), 0o600)
	if _, _, err := LoadGraphs(cfg, nil); err == nil {
		t.Fatal("unknown builtin accepted")
	}
}

func TestNormalizeAndReduce(t *testing.T) {
	cases := []struct {
		in      any
		wantTyp string
		wantErr bool
	}{
		{map[string]any{"role": "user", "content": "x"}, "human", false},
		{map[string]any{"role": "assistant", "content": "x"}, "ai", false},
		{map[string]any{"type": "tool", "content": []any{map[string]any{"type": "text", "text": "t"}}}, "tool", false},
		{"plain text", "human", false},
		{map[string]any{"role": "wizard"}, "", true},
		{map[string]any{"content": "no role"}, "", true},
		{map[string]any{"type": "human", "content": 5.0}, "", true},
		{42.0, "", true},
	}
	for _, tc := range cases {
		m, err := NormalizeMessage(tc.in)
		if (err != nil) != tc.wantErr || err == nil && (m["type"] != tc.wantTyp || m["id"] == "") {
			t.Errorf("%v: %v %v", tc.in, m, err)
		}
	}
	v, _ := ApplyUpdate(map[string]any{}, map[string]any{"messages": []any{map[string]any{"type": "human", "content": "a", "id": "1"}}})
	v, _ = ApplyUpdate(v, map[string]any{"messages": []any{map[string]any{"type": "human", "content": "b", "id": "1"}, map[string]any{"type": "ai", "content": "c"}}})
	ms := v["messages"].([]any)
	if len(ms) != 2 || ms[0].(map[string]any)["content"] != "b" {
		t.Fatalf("reducer: %v", ms)
	}
}

// FuzzReadEvents: whatever a graph prints, the reader returns events or a
// protocol error, never panics.
func FuzzReadEvents(f *testing.F) {
	f.Add([]byte(`{"event":"updates","node":"n","data":{"x":1}}` + "\n" + `{"event":"custom","data":[1,2]}`))
	f.Add([]byte("not json\n"))
	f.Add([]byte(`{"event":"values","data":"nope"}`))
	f.Add([]byte("\n\n" + `{"event":"messages","data":null}`))
	f.Add([]byte(`{"event":"interrupt","data":{"question":"ok?"}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		_ = ReadEvents(strings.NewReader(string(raw)), func(e ProtocolEvent) error {
			if e.Event == "updates" || e.Event == "values" {
				if _, ok := e.Data.(map[string]any); !ok {
					t.Fatalf("%s event with non-object data passed", e.Event)
				}
			}
			return nil
		})
	})
}

// TestCommandGraphStderrReachesTheAgentLog checks that what a command
// graph writes on stderr is passed on whole lines, naming graph and run,
// as well as being the error of a failed run.
func TestCommandGraphStderrReachesTheAgentLog(t *testing.T) {
	var out bytes.Buffer
	g := &Command{Argv: []string{counterBinary(t)}, Env: os.Environ(), Grace: time.Second, Stderr: &out, Name: "counter"}
	err := g.Run(context.Background(), Request{RunID: "run-1", Input: map[string]any{"fail": "the model is down"}},
		func(string, map[string]any, []Event) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "the model is down") {
		t.Fatalf("run: %v", err)
	}
	if got := out.String(); got != "graph counter run run-1: the model is down\n" {
		t.Fatalf("stderr passed on as %q", got)
	}
}
