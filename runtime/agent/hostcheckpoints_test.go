package agent

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

func startEngine(t *testing.T) *Engine { return startEngineWith(t, nil) }

// startEngineWith starts an echo engine on store (nil: a bbolt file).
func startEngineWith(t *testing.T, store Store) *Engine {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "agent.db"), time.Second, Migrations)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	e := &Engine{DB: db, Store: store, Graphs: map[string]Graph{"echo": Echo{}}, Workers: 1, Timeout: time.Minute}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

func call(t *testing.T, e *Engine, method string, p any) (json.RawMessage, error) {
	t.Helper()
	raw, _ := json.Marshal(p)
	out, err := e.hostRequest(context.Background(), method, raw)
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(out)
	return b, nil
}

// listCheckpoints is cp.list's answer to p, decoded.
func listCheckpoints(t *testing.T, e *Engine, p map[string]any) []cpTuple {
	t.Helper()
	raw, err := call(t, e, "cp.list", p)
	if err != nil {
		t.Fatal(err)
	}
	var list []cpTuple
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatal(err)
	}
	return list
}

func put(id, parent, run string, blobs map[string]string) map[string]any {
	var bl []map[string]any
	versions := map[string]string{}
	for ch, v := range blobs {
		bl = append(bl, map[string]any{"channel": ch, "version": v, "t": "json", "b": []byte(`"` + ch + v + `"`)})
		versions[ch] = v
	}
	return map[string]any{"run_id": run, "thread_id": "t1", "checkpoint_ns": "", "checkpoint_id": id, "parent_checkpoint_id": parent,
		"checkpoint": map[string]any{"t": "json", "b": []byte(`{}`)}, "metadata": map[string]any{"t": "json", "b": []byte(`{}`)},
		"metadata_json": map[string]any{"step": len(id)}, "channel_versions": versions, "blobs": bl}
}

// TestHostCheckpointStore: the latest checkpoint is the last id; channel
// values come from the blob of the version each checkpoint names; regular
// writes are kept once per (task, idx) while special ones replace.
func TestHostCheckpointStore(t *testing.T) { testHostCheckpointStore(t, startEngine) }

func testHostCheckpointStore(t *testing.T, start func(*testing.T) *Engine) {
	e := start(t)
	if _, err := call(t, e, "cp.put", put("1a", "", "", map[string]string{"a": "1"})); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, e, "cp.put", put("1b", "1a", "", map[string]string{"b": "1"})); err != nil {
		t.Fatal(err)
	}
	// 1b sees a at version 1 (stored with 1a) and b at 1.
	p := put("1b", "1a", "", map[string]string{"b": "1"})
	p["channel_versions"] = map[string]string{"a": "1", "b": "1"}
	if _, err := call(t, e, "cp.put", p); err != nil {
		t.Fatal(err)
	}
	w := func(idx int, val string) map[string]any {
		return map[string]any{"thread_id": "t1", "checkpoint_ns": "", "checkpoint_id": "1b", "task_id": "task", "task_path": "",
			"writes": []map[string]any{{"channel": "c", "idx": idx, "t": "json", "b": []byte(val)}}}
	}
	for _, wr := range []map[string]any{w(0, `"first"`), w(0, `"again"`), w(-3, `"i1"`), w(-3, `"i2"`)} {
		if _, err := call(t, e, "cp.putWrites", wr); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := call(t, e, "cp.getTuple", map[string]any{"thread_id": "t1", "checkpoint_ns": ""})
	if err != nil {
		t.Fatal(err)
	}
	var tup cpTuple
	if err := json.Unmarshal(raw, &tup); err != nil {
		t.Fatal(err)
	}
	if tup.CheckpointID != "1b" || tup.Parent != "1a" || len(tup.Blobs) != 2 || string(tup.Blobs[0].B) != `"a1"` {
		t.Fatalf("latest: %s", raw)
	}
	if len(tup.Writes) != 2 || tup.Writes[0].Idx != -3 || string(tup.Writes[0].B) != `"i2"` || string(tup.Writes[1].B) != `"first"` {
		t.Fatalf("writes: %+v", tup.Writes)
	}
	raw, _ = call(t, e, "cp.list", map[string]any{"thread_id": "t1", "filter": map[string]any{"step": 2}, "before": "1b"})
	var list []cpTuple
	_ = json.Unmarshal(raw, &list)
	if len(list) != 1 || list[0].CheckpointID != "1a" {
		t.Fatalf("list: %s", raw)
	}
	if _, err := call(t, e, "cp.deleteThread", map[string]any{"thread_id": "t1"}); err != nil {
		t.Fatal(err)
	}
	if raw, _ := call(t, e, "cp.getTuple", map[string]any{"thread_id": "t1"}); string(raw) != "null" {
		t.Fatalf("after deleteThread: %s", raw)
	}
}

// TestCheckpointMetadataJSON: the metadata's JSON copy is kept as the host
// sent it and read back by list filters; it must be an object or absent.
func TestCheckpointMetadataJSON(t *testing.T) {
	e := startEngine(t)
	for _, tc := range []struct {
		id   string
		meta any // encoded as JSON; a json.RawMessage goes verbatim
		err  bool
	}{
		{"2a", map[string]any{"source": "loop", "step": 1, "writes": nil, "tags": []string{"x", "<y>"}}, false},
		{"2b", json.RawMessage(`{ "step" : 2 , "source":"loop"}`), false},
		{"2c", nil, false},
		{"2d", json.RawMessage(`null`), false},
		{"2e", []int{1}, true},
		{"2f", "step", true},
	} {
		p := put(tc.id, "", "", map[string]string{"a": "1"})
		p["metadata_json"] = tc.meta
		_, err := call(t, e, "cp.put", p)
		if tc.err != errors.Is(err, ErrInvalid) {
			t.Fatalf("%s: metadata %v: err %v", tc.id, tc.meta, err)
		}
	}
	for _, tc := range []struct {
		filter map[string]any
		want   string
	}{
		{map[string]any{"step": 1}, "2a"},
		{map[string]any{"source": "loop", "step": 2}, "2b"},
		{map[string]any{"tags": []string{"x", "<y>"}}, "2a"},
		{map[string]any{"source": "loop"}, "2b 2a"},
		{map[string]any{"writes": nil}, "2d 2c 2b 2a"}, // an absent key matches null
		{map[string]any{"step": 3}, ""},
	} {
		var ids []string
		for _, c := range listCheckpoints(t, e, map[string]any{"thread_id": "t1", "filter": tc.filter}) {
			ids = append(ids, c.CheckpointID)
		}
		if got := strings.Join(ids, " "); got != tc.want {
			t.Errorf("filter %v: %q, want %q", tc.filter, got, tc.want)
		}
	}
}

// TestHostCheckpointFencing: only the thread's active run may write; a
// rollback's deletion takes exactly that run's rows.
func TestHostCheckpointFencing(t *testing.T) {
	e := startEngine(t)
	th, err := e.CreateThread("", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	setActive := func(run string) {
		if err := e.bolt().w.Update(func(tx *bolt.Tx) error {
			rec, err := (&boltTx{tx: tx}).GetThread(th.ThreadID)
			if err != nil {
				return err
			}
			rec.Active = run
			return putJSON(tx.Bucket([]byte(bThreads)), th.ThreadID, rec)
		}); err != nil {
			t.Fatal(err)
		}
	}
	cp := func(id, run string) error {
		p := put(id, "", run, map[string]string{"x": id})
		p["thread_id"] = th.ThreadID
		_, err := call(t, e, "cp.put", p)
		return err
	}
	setActive("run-a")
	if err := cp("1a", "run-a"); err != nil {
		t.Fatalf("active run refused: %v", err)
	}
	if err := cp("1b", "run-b"); !errors.Is(err, ErrFenced) {
		t.Fatalf("another run's write: %v", err)
	}
	if err := cp("1c", ""); !errors.Is(err, ErrFenced) {
		t.Fatalf("a write outside runs while one is active: %v", err)
	}
	setActive("run-b")
	if err := cp("1d", "run-a"); !errors.Is(err, ErrFenced) {
		t.Fatalf("late write of a replaced run: %v", err)
	}
	if err := cp("1e", "run-b"); err != nil {
		t.Fatal(err)
	}
	if err := e.bolt().w.Update(func(tx *bolt.Tx) error { return deleteLG(&boltTx{tx: tx}, th.ThreadID, "run-b") }); err != nil {
		t.Fatal(err)
	}
	ids := bboltIDs(t, e, th.ThreadID)
	if len(ids) != 1 || ids[0] != "1a" {
		t.Fatalf("after rolling back run-b: %v", ids)
	}
}

// TestMigrateHostCheckpoints: a database at schema 2 gains the bucket.
func TestMigrateHostCheckpoints(t *testing.T) {
	db := migratedFrom(t, 2)
	_ = db.View(func(tx *bolt.Tx) error {
		if tx.Bucket([]byte(bLG)) == nil {
			t.Errorf("bucket %s missing", bLG)
		}
		for _, b := range []string{bLGCheckpoints, bLGBlobs, bLGWrites} {
			if tx.Bucket([]byte(b)) != nil {
				t.Errorf("bucket %s left after the merge", b)
			}
		}
		return nil
	})
}

// TestHostStore: the host's store methods serve the items the store API
// serves; a missing item is null, not an error; bad input is refused.
func TestHostStore(t *testing.T) { testHostStore(t, startEngine) }

func testHostStore(t *testing.T, start func(*testing.T) *Engine) {
	e := start(t)
	if err := e.PutItem([]string{"users", "ada"}, "profile", map[string]any{"likes": "tea"}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		method string
		p      map[string]any
		want   string // JSON of the reply; "" for an error
	}{
		{"store.put", map[string]any{"namespace": []string{"users", "bob"}, "key": "note", "value": map[string]any{"text": "hi"}}, "null"},
		{"store.listNamespaces", map[string]any{"prefix": []string{"users"}, "limit": 10}, `[["users","ada"],["users","bob"]]`},
		{"store.listNamespaces", map[string]any{"prefix": []string{}, "max_depth": 1, "limit": 10}, `[["users"]]`},
		{"store.delete", map[string]any{"namespace": []string{"users", "bob"}, "key": "note"}, "null"},
		{"store.get", map[string]any{"namespace": []string{"users", "bob"}, "key": "note"}, "null"},
		{"store.put", map[string]any{"namespace": []string{"users", "bob"}, "key": "note"}, ""},
		{"store.put", map[string]any{"namespace": []string{"a.b"}, "key": "k", "value": map[string]any{}}, ""},
		{"store.nothing", map[string]any{}, ""},
	}
	for i, s := range steps {
		out, err := call(t, e, s.method, s.p)
		switch {
		case s.want == "" && err == nil:
			t.Errorf("step %d %s: want an error, got %s", i, s.method, out)
		case s.want != "" && err != nil:
			t.Errorf("step %d %s: %v", i, s.method, err)
		case s.want != "" && string(out) != s.want:
			t.Errorf("step %d %s: got %s, want %s", i, s.method, out, s.want)
		}
	}
	out, err := call(t, e, "store.get", map[string]any{"namespace": []string{"users", "ada"}, "key": "profile"})
	if err != nil {
		t.Fatal(err)
	}
	var it Item
	if err := json.Unmarshal(out, &it); err != nil || it.Value["likes"] != "tea" || it.Key != "profile" {
		t.Fatalf("store.get: %s (%v)", out, err)
	}
	out, err = call(t, e, "store.search", map[string]any{"namespace_prefix": []string{"users"}, "filter": map[string]any{"likes": "tea"}, "limit": 10})
	if err != nil {
		t.Fatalf("store.search: %s (%v)", out, err)
	}
	var items []Item
	_ = json.Unmarshal(out, &items)
	if len(items) != 1 || items[0].Key != "profile" {
		t.Fatalf("store.search: %s", out)
	}
}

// migratedFrom opens a new database written at schema version from (its
// first from migrations) with every migration, closed with t.
func migratedFrom(t *testing.T, from int) *bolt.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent.db")
	db, err := storage.Open(path, time.Second, Migrations[:from])
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if db, err = storage.Open(path, time.Second, Migrations); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
