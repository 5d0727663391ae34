package agentapi_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"slipway/server/servertest"
)

func newThread(t *testing.T, a *servertest.Agent) string {
	t.Helper()
	r := a.Do("POST", "/threads", map[string]any{})
	if r.Status != 200 {
		t.Fatalf("create thread: %d %s", r.Status, r.Body)
	}
	return r.Map()["thread_id"].(string)
}

func runBody(text string, sleep float64, strategy string) map[string]any {
	in := map[string]any{"messages": []any{map[string]any{"role": "user", "content": text}}}
	if sleep > 0 {
		in["sleep"] = sleep
	}
	b := map[string]any{"assistant_id": "echo", "input": in}
	if strategy != "" {
		b["multitask_strategy"] = strategy
	}
	return b
}

func messages(t *testing.T, a *servertest.Agent, thread string) []map[string]any {
	t.Helper()
	r := a.Do("GET", "/threads/"+thread+"/state", nil)
	if r.Status != 200 {
		t.Fatalf("state: %d %s", r.Status, r.Body)
	}
	var out []map[string]any
	ms, _ := r.Map()["values"].(map[string]any)["messages"].([]any)
	for _, m := range ms {
		out = append(out, m.(map[string]any))
	}
	return out
}

func TestMultitaskStrategies(t *testing.T) {
	a := servertest.StartAgent(t, nil)
	wait := func(th, rid string) {
		t.Helper()
		if r := a.Do("GET", "/threads/"+th+"/runs/"+rid+"/join", nil); r.Status != 200 {
			t.Fatalf("join %s: %d %s", rid, r.Status, r.Body)
		}
	}
	t.Run("interrupt", func(t *testing.T) {
		th := newThread(t, a)
		first := a.Do("POST", "/threads/"+th+"/runs", runBody("one", 5, "")).Map()["run_id"].(string)
		time.Sleep(200 * time.Millisecond)
		second := a.Do("POST", "/threads/"+th+"/runs", runBody("two", 0, "interrupt")).Map()["run_id"].(string)
		wait(th, second)
		if st := a.Do("GET", "/threads/"+th+"/runs/"+first, nil).Map()["status"]; st != "interrupted" {
			t.Fatalf("first run %v", st)
		}
		// The interrupted run keeps its progress (its input), then the second run's.
		ms := messages(t, a, th)
		if len(ms) != 3 || ms[0]["content"] != "one" || ms[1]["content"] != "two" || ms[2]["content"] != "two" {
			t.Fatalf("state: %v", ms)
		}
	})
	t.Run("rollback", func(t *testing.T) {
		th := newThread(t, a)
		first := a.Do("POST", "/threads/"+th+"/runs", runBody("one", 5, "")).Map()["run_id"].(string)
		time.Sleep(200 * time.Millisecond)
		second := a.Do("POST", "/threads/"+th+"/runs", runBody("two", 0, "rollback")).Map()["run_id"].(string)
		wait(th, second)
		if r := a.Do("GET", "/threads/"+th+"/runs/"+first, nil); r.Status != 404 {
			t.Fatalf("rolled back run still there: %d", r.Status)
		}
		ms := messages(t, a, th)
		if len(ms) != 2 || ms[0]["content"] != "two" {
			t.Fatalf("state: %v", ms)
		}
	})
	t.Run("enqueue", func(t *testing.T) {
		th := newThread(t, a)
		first := a.Do("POST", "/threads/"+th+"/runs", runBody("one", 0.5, "")).Map()["run_id"].(string)
		second := a.Do("POST", "/threads/"+th+"/runs", runBody("two", 0, "enqueue"))
		if second.Map()["status"] != "pending" {
			t.Fatalf("queued run: %s", second.Body)
		}
		wait(th, second.Map()["run_id"].(string))
		for _, id := range []string{first, second.Map()["run_id"].(string)} {
			if st := a.Do("GET", "/threads/"+th+"/runs/"+id, nil).Map()["status"]; st != "success" {
				t.Fatalf("run %s: %v", id, st)
			}
		}
		ms := messages(t, a, th)
		if len(ms) != 4 || ms[0]["content"] != "one" || ms[2]["content"] != "two" {
			t.Fatalf("state: %v", ms)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		th := newThread(t, a)
		id := a.Do("POST", "/threads/"+th+"/runs", runBody("one", 5, "")).Map()["run_id"].(string)
		time.Sleep(100 * time.Millisecond)
		if r := a.Do("POST", "/threads/"+th+"/runs/"+id+"/cancel?wait=1", nil); r.Status != 204 {
			t.Fatalf("cancel: %d %s", r.Status, r.Body)
		}
		if st := a.Do("GET", "/threads/"+th+"/runs/"+id, nil).Map()["status"]; st != "interrupted" {
			t.Fatalf("cancelled run: %v", st)
		}
		if st := a.Do("GET", "/threads/"+th, nil).Map()["status"]; st == "busy" {
			t.Fatal("thread still busy")
		}
	})
}

// TestCrashRecovery kills the agent while one run is running and another
// is queued: after a restart the running one ended in error saying the
// server restarted, the queued one runs, and every thread and run is there.
func TestCrashRecovery(t *testing.T) {
	a := servertest.StartAgent(t, nil)
	th := newThread(t, a)
	running := a.Do("POST", "/threads/"+th+"/runs", runBody("one", 30, "")).Map()["run_id"].(string)
	queued := a.Do("POST", "/threads/"+th+"/runs", runBody("two", 0, "enqueue")).Map()["run_id"].(string)
	other := newThread(t, a)
	lone := newThread(t, a) // its only run is cut short
	a.Do("POST", "/threads/"+lone+"/runs", runBody("one", 30, ""))
	time.Sleep(300 * time.Millisecond)
	a.Kill()
	a.Restart()
	r := a.Do("GET", "/threads/"+th+"/runs/"+running, nil).Map()
	if r["status"] != "error" || !strings.Contains(fmt.Sprint(r["error"]), "restarted") {
		t.Fatalf("running run after crash: %v", r)
	}
	if j := a.Do("GET", "/threads/"+th+"/runs/"+queued+"/join", nil); j.Status != 200 {
		t.Fatalf("join queued: %d %s", j.Status, j.Body)
	}
	if st := a.Do("GET", "/threads/"+th+"/runs/"+queued, nil).Map()["status"]; st != "success" {
		t.Fatalf("queued run after crash: %v", st)
	}
	if r := a.Do("GET", "/threads/"+other, nil); r.Status != 200 {
		t.Fatal("thread lost in the crash")
	}
	// The thread shows the error: RuntimeError, as the Python reference
	// ends a run whose worker kept dying.
	if lt := a.Do("GET", "/threads/"+lone, nil).Map(); lt["status"] != "error" || fmt.Sprint(lt["error"]) != "map[error:RuntimeError message:the agent server restarted while the run was running]" {
		t.Fatalf("thread of the run cut short after the crash: %v", lt)
	}
	if ms := messages(t, a, th); len(ms) != 2 || ms[0]["content"] != "two" {
		t.Fatalf("state after recovery: %v", ms)
	}
}

func TestBadInput(t *testing.T) {
	a := servertest.StartAgent(t, map[string]string{"SLIPWAY_AGENT_MAX_BODY_MB": "1"})
	th := newThread(t, a)
	cases := []struct {
		name, method, path string
		body               any
		want               int
	}{
		{"malformed json", "POST", "/threads/" + th + "/runs", `{"assistant_id": `, 422},
		{"wrong type", "POST", "/threads/" + th + "/runs", `{"assistant_id": 5}`, 422},
		{"missing assistant", "POST", "/threads/" + th + "/runs", `{}`, 422},
		{"unknown assistant", "POST", "/threads/" + th + "/runs", `{"assistant_id": "nope"}`, 404},
		{"unknown thread", "POST", "/threads/0190f0f0-0000-7000-8000-000000000000/runs", runBody("x", 0, ""), 404},
		{"thread id not uuid", "GET", "/threads/xyz", nil, 422},
		{"bad strategy", "POST", "/threads/" + th + "/runs", `{"assistant_id":"echo","multitask_strategy":"maybe"}`, 422},
		{"bad stream mode", "POST", "/threads/" + th + "/runs", `{"assistant_id":"echo","stream_mode":["nope"]}`, 422},
		{"bad message role", "POST", "/threads/" + th + "/runs", `{"assistant_id":"echo","input":{"messages":[{"role":"wizard","content":"x"}]}}`, 422},
		{"messages not a list", "POST", "/threads/" + th + "/runs", `{"assistant_id":"echo","input":{"messages":"hi"}}`, 422},
		{"oversized body", "POST", "/threads", `{"metadata":{"x":"` + strings.Repeat("a", 2<<20) + `"}}`, 413},
		{"duplicate thread", "POST", "/threads", map[string]any{"thread_id": th}, 409},
		{"bad sleep", "POST", "/runs/wait", `{"assistant_id":"echo","input":{"sleep":"long"}}`, 200},
		{"unknown run", "GET", "/threads/" + th + "/runs/0190f0f0-0000-7000-8000-000000000000", nil, 404},
		{"store without namespace", "PUT", "/store/items", `{"key":"k","value":{}}`, 422},
		{"store item missing", "GET", "/store/items?namespace=a&key=nope", nil, 200},
		{"bad subgraphs flag", "GET", "/threads/" + th + "/state?subgraphs=maybe", nil, 422},
		{"bad xray", "GET", "/assistants/echo/graph?xray=deep", nil, 422},
		{"bad recurse", "GET", "/assistants/echo/subgraphs?recurse=maybe", nil, 422},
		{"subgraphs of a built-in graph", "GET", "/assistants/echo/subgraphs", nil, 200},
		{"fork of a built-in thread", "POST", "/threads/" + th + "/state", `{"values":{},"checkpoint_id":"0190f0f0-0000-7000-8000-000000000000"}`, 422},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := a.Do(tc.method, tc.path, tc.body)
			if r.Status != tc.want {
				t.Fatalf("status %d, want %d: %.200s", r.Status, tc.want, r.Body)
			}
			if tc.want >= 400 && tc.want != 413 {
				if d, ok := r.Map()["detail"]; !ok || d == "" {
					t.Fatalf("no detail: %s", r.Body)
				}
			}
			if tc.name == "store item missing" && strings.TrimSpace(string(r.Body)) != "null" {
				t.Fatalf("missing store item: %s, want null", r.Body)
			}
			if tc.name == "bad sleep" && !strings.Contains(string(r.Body), "__error__") {
				t.Fatalf("failed run via /runs/wait: %s", r.Body)
			}
		})
	}
	if r := a.Do("GET", "/ok", nil); r.Status != 200 {
		t.Fatal("agent unhealthy after bad input")
	}
}

// TestCrashRecoveryUnderLoad kills the agent with SIGKILL while 24 threads
// each have a running or pending sleeper and two queued runs behind it, on
// top of finished runs: after a restart every acknowledged thread and run is
// there, every run that was running ended error ("server restarted"),
// every other run that was pending runs to success, and finished runs kept
// their status.
func TestCrashRecoveryUnderLoad(t *testing.T) {
	a := servertest.StartAgent(t, map[string]string{"SLIPWAY_LOG_LEVEL": "warn", "SLIPWAY_AGENT_WORKERS": "8"})
	type ack struct {
		thread, run string
		sleeper     bool
	}
	var finished, busy []ack
	for i := 0; i < 24; i++ {
		th := newThread(t, a)
		w := a.Do("POST", "/threads/"+th+"/runs", runBody(fmt.Sprint("done ", i), 0, ""))
		finished = append(finished, ack{th, w.Map()["run_id"].(string), false})
		a.Do("GET", "/threads/"+th+"/runs/"+w.Map()["run_id"].(string)+"/join", nil)
	}
	// Only then saturate the 8 workers with sleepers.
	for i, f := range finished {
		th := f.thread
		for j, sleep := range []float64{30, 0, 0} {
			r := a.Do("POST", "/threads/"+th+"/runs", runBody(fmt.Sprint("queued ", i, j), sleep, "enqueue"))
			if r.Status != 200 {
				t.Fatalf("create run: %d %s", r.Status, r.Body)
			}
			busy = append(busy, ack{th, r.Map()["run_id"].(string), sleep > 0})
		}
	}
	time.Sleep(300 * time.Millisecond) // let the 8 workers pick up sleepers
	before := map[string]string{}
	for _, b := range busy {
		before[b.run] = a.Do("GET", "/threads/"+b.thread+"/runs/"+b.run, nil).Map()["status"].(string)
	}
	a.Kill()
	a.Restart()
	for _, f := range finished {
		if st := a.Do("GET", "/threads/"+f.thread+"/runs/"+f.run, nil).Map()["status"]; st != "success" {
			t.Fatalf("finished run %s after crash: %v", f.run, st)
		}
	}
	// A sleeper still pending would sleep its 30 s after the restart:
	// cancel those rather than wait; the runs queued behind them then run.
	for _, b := range busy {
		if b.sleeper && before[b.run] == "pending" {
			if r := a.Do("POST", "/threads/"+b.thread+"/runs/"+b.run+"/cancel", nil); r.Status >= 300 {
				t.Fatalf("cancel pending sleeper: %d %s", r.Status, r.Body)
			}
		}
	}
	running, pending := 0, 0
	for _, b := range busy {
		a.Do("GET", "/threads/"+b.thread+"/runs/"+b.run+"/join", nil)
		r := a.Do("GET", "/threads/"+b.thread+"/runs/"+b.run, nil)
		if r.Status != 200 {
			t.Fatalf("acknowledged run %s lost: %d %s", b.run, r.Status, r.Body)
		}
		st := r.Map()["status"]
		switch before[b.run] {
		case "running":
			running++
			if st != "error" || !strings.Contains(fmt.Sprint(r.Map()["error"]), "server restarted") {
				t.Fatalf("run running at the crash: %v", r.Map())
			}
		case "pending":
			if want := map[bool]string{true: "interrupted", false: "success"}[b.sleeper]; st != want {
				t.Fatalf("run pending at the crash ended %v", st)
			}
			pending++
		default:
			t.Fatalf("run %s was %q before the crash", b.run, before[b.run])
		}
	}
	if running == 0 || pending == 0 {
		t.Fatalf("the crash hit %d running and %d pending runs: want both", running, pending)
	}
	if n := a.Do("POST", "/threads/count", map[string]any{}); fmt.Sprint(n.JSON()) != "24" {
		t.Fatalf("threads after crash: %s", n.Body)
	}
}

// TestBatchAndCheckpointState: POST /runs/batch creates stateless runs (and
// none when an item is invalid); POST /threads/{id}/state/checkpoint reads
// an earlier state, as the SDK's getState with a checkpoint object does.
func TestBatchAndCheckpointState(t *testing.T) {
	a := servertest.StartAgent(t, map[string]string{"SLIPWAY_LOG_LEVEL": "warn"})
	r := a.Do("POST", "/runs/batch", []any{runBody("one", 0, ""), runBody("two", 0, "")})
	runs, _ := r.JSON().([]any)
	if r.Status != 200 || len(runs) != 2 || runs[0].(map[string]any)["run_id"] == runs[1].(map[string]any)["run_id"] {
		t.Fatalf("batch: %d %s", r.Status, r.Body)
	}
	bad := a.Do("POST", "/runs/batch", []any{runBody("one", 0, ""), map[string]any{"input": map[string]any{}}})
	if bad.Status != 422 || !strings.Contains(string(bad.Body), "run request 1") {
		t.Fatalf("batch with a bad item: %d %s", bad.Status, bad.Body)
	}
	if e := a.Do("POST", "/runs/batch", map[string]any{}); e.Status != 422 {
		t.Fatalf("batch of an object: %d %s", e.Status, e.Body)
	}

	th := newThread(t, a)
	a.Do("POST", "/threads/"+th+"/runs/wait", runBody("first", 0, ""))
	a.Do("POST", "/threads/"+th+"/runs/wait", runBody("second", 0, ""))
	hist, _ := a.Do("POST", "/threads/"+th+"/history", map[string]any{"limit": 10}).JSON().([]any)
	if len(hist) < 3 {
		t.Fatalf("history: %v", hist)
	}
	// history is newest first: the last entry is the first run's input.
	oldest := hist[len(hist)-1].(map[string]any)["checkpoint"].(map[string]any)["checkpoint_id"]
	st := a.Do("POST", "/threads/"+th+"/state/checkpoint", map[string]any{"checkpoint": map[string]any{"checkpoint_id": oldest}})
	ms, _ := st.Map()["values"].(map[string]any)["messages"].([]any)
	if st.Status != 200 || len(ms) != 1 || ms[0].(map[string]any)["content"] != "first" {
		t.Fatalf("state at the oldest checkpoint: %d %s", st.Status, st.Body)
	}
	if nf := a.Do("POST", "/threads/"+th+"/state/checkpoint", map[string]any{"checkpoint": map[string]any{"checkpoint_id": "01a00000-0000-7000-8000-000000000000"}}); nf.Status != 404 {
		t.Fatalf("unknown checkpoint: %d %s", nf.Status, nf.Body)
	}
	// The SDK's metadata filter: the two runs' input checkpoints, newest first.
	inputs, _ := a.Do("POST", "/threads/"+th+"/history", map[string]any{"metadata": map[string]any{"source": "input"}}).JSON().([]any)
	if len(inputs) != 2 || inputs[1].(map[string]any)["checkpoint"].(map[string]any)["checkpoint_id"] != oldest {
		t.Fatalf("history filtered by metadata: %v", inputs)
	}
}

// TestHistoryMetadataFilter: POST /threads/{id}/history with `metadata`
// lists only the checkpoints whose metadata holds those keys and values,
// up to limit, as the SDK's getHistory({metadata}) asks.
func TestHistoryMetadataFilter(t *testing.T) {
	a := servertest.StartAgent(t, map[string]string{"SLIPWAY_LOG_LEVEL": "warn"})
	th := newThread(t, a)
	a.Do("POST", "/threads/"+th+"/runs/wait", runBody("first", 0, ""))
	a.Do("POST", "/threads/"+th+"/runs/wait", runBody("second", 0, ""))
	all, _ := a.Do("POST", "/threads/"+th+"/history", map[string]any{"limit": 100}).JSON().([]any)
	for _, tc := range []struct {
		name   string
		body   map[string]any
		want   int
		source string
	}{
		{"no filter", map[string]any{}, len(all), ""},
		{"each run's input", map[string]any{"metadata": map[string]any{"source": "input"}}, 2, "input"},
		{"limited", map[string]any{"metadata": map[string]any{"source": "input"}, "limit": 1}, 1, "input"},
		{"a key no checkpoint has", map[string]any{"metadata": map[string]any{"origin": "elsewhere"}}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := a.Do("POST", "/threads/"+th+"/history", tc.body)
			got, _ := r.JSON().([]any)
			if r.Status != 200 || len(got) != tc.want {
				t.Fatalf("%d checkpoints (of %d), want %d: %d %s", len(got), len(all), tc.want, r.Status, r.Body)
			}
			for _, h := range got {
				if md := h.(map[string]any)["metadata"].(map[string]any); tc.source != "" && md["source"] != tc.source {
					t.Fatalf("a checkpoint of source %v passed the filter", md["source"])
				}
			}
		})
	}
}

// TestAssistantVersions: every patch is a version; /latest goes back to one
// and the next patch still gets a new number.
func TestAssistantVersions(t *testing.T) {
	a := servertest.StartAgent(t, map[string]string{"SLIPWAY_LOG_LEVEL": "warn"})
	c := a.Do("POST", "/assistants", map[string]any{"graph_id": "echo", "name": "v1", "config": map[string]any{"configurable": map[string]any{"tone": "dry"}}})
	if c.Status != 200 {
		t.Fatalf("create: %d %s", c.Status, c.Body)
	}
	id := c.Map()["assistant_id"].(string)
	for _, name := range []string{"v2", "v3"} {
		if p := a.Do("PATCH", "/assistants/"+id, map[string]any{"name": name}); p.Status != 200 {
			t.Fatalf("patch: %d %s", p.Status, p.Body)
		}
	}
	names := func() []string {
		var out []string
		vs, _ := a.Do("POST", "/assistants/"+id+"/versions", map[string]any{}).JSON().([]any)
		for _, v := range vs {
			m := v.(map[string]any)
			// A version is written once: created_at and no updated_at,
			// as on both reference servers.
			if _, ok := m["updated_at"]; ok || m["created_at"] == nil || m["assistant_id"] != id {
				t.Fatalf("version entry: %v", m)
			}
			out = append(out, fmt.Sprint(m["version"], m["name"]))
		}
		return out
	}
	if got := strings.Join(names(), ","); got != "3v3,2v2,1v1" {
		t.Fatalf("versions: %s", got)
	}
	l := a.Do("POST", "/assistants/"+id+"/latest", map[string]any{"version": 1})
	if l.Status != 200 || l.Map()["name"] != "v1" || a.Do("GET", "/assistants/"+id, nil).Map()["version"] != 1.0 {
		t.Fatalf("latest: %d %s", l.Status, l.Body)
	}
	if p := a.Do("PATCH", "/assistants/"+id, map[string]any{"name": "v4"}); p.Map()["version"] != 4.0 {
		t.Fatalf("patch after going back: %s", p.Body)
	}
	for _, bad := range []struct {
		body   any
		status int
	}{{map[string]any{"version": 9}, 404}, {map[string]any{}, 422}, {map[string]any{"version": "1"}, 422}} {
		if r := a.Do("POST", "/assistants/"+id+"/latest", bad.body); r.Status != bad.status {
			t.Fatalf("latest %v: %d %s", bad.body, r.Status, r.Body)
		}
	}
	if r := a.Do("DELETE", "/assistants/"+id, nil); r.Status >= 300 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if r := a.Do("POST", "/assistants/"+id+"/versions", map[string]any{}); r.Status != 404 {
		t.Fatalf("versions of a deleted assistant: %d %s", r.Status, r.Body)
	}
}
