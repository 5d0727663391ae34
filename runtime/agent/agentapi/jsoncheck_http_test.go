package agentapi_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/server/httpx"
	"slipway/server/servertest"
	"slipway/storage"
)

// nested is {"d":{"d":...{"d":"bottom"}...}} with depth objects.
func nested(depth int) string {
	return strings.Repeat(`{"d":`, depth) + `"bottom"` + strings.Repeat("}", depth)
}

// TestAgentRefusesBadJSON: the agent API refuses, with a 422 naming where,
// an input nested deeper than httpx.MaxJSONDepth, a duplicate key and an
// invalid UTF-8 string, on runs, threads and the store, and stores nothing.
func TestAgentRefusesBadJSON(t *testing.T) {
	a := servertest.StartAgent(t, map[string]string{"SLIPWAY_LOG_LEVEL": "warn"})
	th := newThread(t, a)
	deep := `{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"hi"}],"x":` + nested(httpx.MaxJSONDepth) + `}}`
	cases := []struct {
		name, method, path, body string
		loc                      []any
	}{
		{"deep run input", "POST", "/threads/" + th + "/runs/wait", deep, nil},
		{"deep stateless run", "POST", "/runs/wait", deep, nil},
		{"deep batch item", "POST", "/runs/batch", "[" + deep + "]", nil},
		{"9,997 levels", "POST", "/threads/" + th + "/runs", `{"assistant_id":"echo","input":` + nested(9997) + `}`, nil},
		{"duplicate key in a run", "POST", "/threads/" + th + "/runs/wait", `{"assistant_id":"echo","assistant_id":"other","input":{}}`, []any{"body", "assistant_id"}},
		{"duplicate key in state", "POST", "/threads/" + th + "/state", `{"values":{"a":1,"a":2}}`, []any{"body", "values", "a"}},
		{"invalid UTF-8 in metadata", "PATCH", "/threads/" + th, "{\"metadata\":{\"k\":\"\xff\"}}", []any{"body", "metadata", "k"}},
		{"invalid UTF-8 in a store item", "PUT", "/store/items", "{\"namespace\":[\"n\"],\"key\":\"k\",\"value\":{\"v\":\"\xc3(\"}}", []any{"body", "value", "v"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := a.Do(tc.method, tc.path, tc.body)
			if r.Status != 422 {
				t.Fatalf("status %d: %.300s", r.Status, r.Body)
			}
			var body struct {
				Detail []struct {
					Loc []any  `json:"loc"`
					Msg string `json:"msg"`
				} `json:"detail"`
			}
			if err := json.Unmarshal(r.Body, &body); err != nil || len(body.Detail) != 1 || body.Detail[0].Msg == "" {
				t.Fatalf("not a validation error: %.300s", r.Body)
			}
			loc := body.Detail[0].Loc
			if tc.loc != nil && !equalLoc(loc, tc.loc) {
				t.Fatalf("loc %v, want %v", loc, tc.loc)
			}
			if tc.loc == nil && (len(loc) < 2 || loc[0] != "body") {
				t.Fatalf("loc %v names no place in the body", loc)
			}
		})
	}
	if r := a.Do("GET", "/threads/"+th+"/history", nil); r.Status != 200 || strings.TrimSpace(string(r.Body)) != "[]" {
		t.Fatalf("a refused request left checkpoints: %d %s", r.Status, r.Body)
	}
	if r := a.Do("POST", "/threads/"+th+"/runs/wait", `{"assistant_id":"echo","input":{"x":`+nested(httpx.MaxJSONDepth-3)+`}}`); r.Status != 200 {
		t.Fatalf("an input at the depth limit: %d %.300s", r.Status, r.Body)
	}
}

func equalLoc(got, want []any) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if f, ok := got[i].(float64); ok {
			if w, ok := want[i].(int); !ok || int(f) != w {
				return false
			}
		} else if got[i] != want[i] {
			return false
		}
	}
	return true
}

// TestDeepStoredThreadStaysReadable: a thread whose state an older version
// stored more deeply nested than encoding/json decodes (written here
// straight into the agent's database) is still served by state, history,
// copy, get and search, with the value intact.
func TestDeepStoredThreadStaysReadable(t *testing.T) {
	a := servertest.StartAgent(t, map[string]string{"SLIPWAY_LOG_LEVEL": "warn"})
	th := newThread(t, a)
	if r := a.Do("POST", "/threads/"+th+"/runs/wait", runBody("hi", 0, "")); r.Status != 200 {
		t.Fatalf("run: %d %s", r.Status, r.Body)
	}
	a.Stop()

	const depth = 10005
	deep := nested(depth)
	db, err := bolt.Open(filepath.Join(a.DataDir, "agent.db"), 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// Put the deep value into the thread's values and into its latest
	// checkpoint's values and metadata.writes, as a run would have.
	deepen := func(raw []byte, paths ...[]string) []byte {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("stored record: %v", err)
		}
		for _, p := range paths {
			cur := m
			for _, k := range p[:len(p)-1] {
				next, _ := cur[k].(map[string]any)
				if next == nil {
					next = map[string]any{}
					cur[k] = next
				}
				cur = next
			}
			cur[p[len(p)-1]] = "__DEEP__"
		}
		out, _ := json.Marshal(m)
		return bytes.ReplaceAll(out, []byte(`"__DEEP__"`), []byte(deep))
	}
	tid := uuid.MustParse(th)
	err = db.Update(func(tx *bolt.Tx) error {
		threads := tx.Bucket([]byte("threads"))
		if err := threads.Put([]byte(th), deepen(threads.Get([]byte(th)), []string{"values", "deep"})); err != nil {
			return err
		}
		cps := tx.Bucket([]byte("checkpoints"))
		c := cps.Cursor()
		var last []byte
		for k, _ := c.Seek(tid[:]); k != nil && bytes.HasPrefix(k, tid[:]); k, _ = c.Next() {
			last = storage.Copy(k)
		}
		if last == nil {
			t.Fatal("no checkpoint stored")
		}
		return cps.Put(last, deepen(cps.Get(last), []string{"values", "deep"}, []string{"metadata", "writes", "deep"}))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	a.Restart()

	// The answers are as deep as what was stored, so they are checked as
	// text: encoding/json could not decode them either.
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/threads/" + th + "/state", ""},
		{"GET", "/threads/" + th + "/history", ""},
		{"POST", "/threads/" + th + "/history", `{"limit":5}`},
		{"GET", "/threads/" + th, ""},
		{"POST", "/threads/search", `{"limit":10}`},
	} {
		var body any
		if c.body != "" {
			body = c.body
		}
		r := a.Do(c.method, c.path, body)
		if r.Status != 200 || !bytes.Contains(r.Body, []byte(deep)) {
			t.Fatalf("%s %s: %d, deep value returned: %v, %.300s", c.method, c.path, r.Status, bytes.Contains(r.Body, []byte(deep)), r.Body)
		}
	}
	cp := a.Do("POST", "/threads/"+th+"/copy", nil)
	if cp.Status != 200 {
		t.Fatalf("copy: %d %.300s", cp.Status, cp.Body)
	}
	var copied struct {
		ThreadID string `json:"thread_id"`
	}
	// The thread view holds the values: find the id without decoding them.
	i := bytes.Index(cp.Body, []byte(`"thread_id":"`))
	if i < 0 {
		t.Fatalf("copy answer has no thread_id: %.300s", cp.Body)
	}
	copied.ThreadID = string(cp.Body[i+13 : i+13+36])
	if r := a.Do("GET", "/threads/"+copied.ThreadID+"/history", nil); r.Status != 200 || !bytes.Contains(r.Body, []byte(deep)) {
		t.Fatalf("history of the copy: %d %.300s", r.Status, r.Body)
	}
	// The thread still takes runs.
	if r := a.Do("POST", "/threads/"+th+"/runs/wait", runBody("again", 0, "")); r.Status != 200 {
		t.Fatalf("run on the deep thread: %d %.300s", r.Status, r.Body)
	}
}
