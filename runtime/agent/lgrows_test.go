package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

// TestHostCheckpointsFromSchema4: checkpoints saved by an agent before
// the one-bucket layout (three buckets, JSON rows) are still read, listed,
// filtered, rolled back by run and copied after the migration, and new
// checkpoints written beside them read back alike.
func TestHostCheckpointsFromSchema4(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.db")
	db, err := storage.Open(path, time.Second, Migrations[:4])
	if err != nil {
		t.Fatal(err)
	}
	// Rows exactly as the schema-4 code wrote them.
	err = db.Update(func(tx *bolt.Tx) error {
		rows := []struct{ bucket, key, val string }{
			{"lg_checkpoints", "t1\x00\x001a", `{"run_id":"run-a","checkpoint":{"t":"json","b":"e30="},"metadata":{"t":"json","b":"e30="},"metadata_json":{"step":1},"channel_versions":{"a":"1"}}`},
			{"lg_checkpoints", "t1\x00\x001b", `{"run_id":"run-b","parent_checkpoint_id":"1a","checkpoint":{"t":"json","b":"e30="},"metadata":{"t":"json","b":"e30="},"metadata_json":{"step":2},"channel_versions":{"a":"1","b":"2"}}`},
			{"lg_blobs", "t1\x00\x00a\x001", `{"run_id":"run-a","t":"json","b":"ImExIg=="}`},
			{"lg_blobs", "t1\x00\x00b\x002", `{"run_id":"run-b","t":"json","b":"ImIyIg=="}`},
			{"lg_writes", "t1\x00\x001a\x00task\x00\x80\x00\x00\x00", `{"run_id":"run-a","task_id":"task","task_path":"","channel":"c","idx":0,"t":"json","b":"ImMi"}`},
		}
		for _, r := range rows {
			if err := tx.Bucket([]byte(r.bucket)).Put([]byte(r.key), []byte(r.val)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if db, err = storage.Open(path, time.Second, Migrations); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	e := &Engine{DB: db, Graphs: map[string]Graph{"echo": Echo{}}, Workers: 1, Timeout: time.Minute}
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	get := func(id string) cpTuple {
		t.Helper()
		raw, err := call(t, e, "cp.getTuple", map[string]any{"thread_id": "t1", "checkpoint_ns": "", "checkpoint_id": id})
		if err != nil {
			t.Fatal(err)
		}
		var tup cpTuple
		if err := json.Unmarshal(raw, &tup); err != nil {
			t.Fatal(err)
		}
		return tup
	}
	if tup := get(""); tup.CheckpointID != "1b" || tup.Parent != "1a" || len(tup.Blobs) != 2 || string(tup.Blobs[1].B) != `"b2"` {
		t.Fatalf("latest old checkpoint: %+v", tup)
	}
	if tup := get("1a"); len(tup.Writes) != 1 || string(tup.Writes[0].B) != `"c"` || string(tup.Blobs[0].B) != `"a1"` {
		t.Fatalf("old checkpoint 1a: %+v", tup)
	}
	// A new checkpoint on top, in the new row format, sharing a's old value.
	p := put("1c", "1b", "", map[string]string{"c": "3"})
	p["channel_versions"] = map[string]string{"a": "1", "b": "2", "c": "3"}
	if _, err := call(t, e, "cp.put", p); err != nil {
		t.Fatal(err)
	}
	if tup := get(""); tup.CheckpointID != "1c" || len(tup.Blobs) != 3 || string(tup.Blobs[0].B) != `"a1"` || string(tup.Blobs[2].B) != `"c3"` {
		t.Fatalf("new checkpoint over old rows: %+v", tup)
	}
	raw, _ := call(t, e, "cp.list", map[string]any{"thread_id": "t1", "filter": map[string]any{"step": 2}})
	var list []cpTuple
	_ = json.Unmarshal(raw, &list)
	if len(list) != 2 || list[0].CheckpointID != "1c" || list[1].CheckpointID != "1b" {
		t.Fatalf("filtered list over both formats: %s", raw)
	}
	if err := e.bolt().w.Update(func(tx *bolt.Tx) error { return copyLG(&boltTx{tx: tx}, "t1", "t2") }); err != nil {
		t.Fatal(err)
	}
	if err := e.bolt().w.Update(func(tx *bolt.Tx) error { return deleteLG(&boltTx{tx: tx}, "t1", "run-b") }); err != nil {
		t.Fatal(err)
	}
	if tup := get(""); tup.CheckpointID != "1c" || len(tup.Blobs) != 2 {
		t.Fatalf("after rolling back old run-b, 1c lost b's value only: %+v", tup)
	}
	raw, _ = call(t, e, "cp.list", map[string]any{"thread_id": "t2"})
	list = nil
	_ = json.Unmarshal(raw, &list)
	if len(list) != 3 || len(list[0].Blobs) != 3 {
		t.Fatalf("copied thread: %s", raw)
	}
}

// TestHostCheckpointValueWrittenOnce: a value is stored once per
// (channel, version). A saver that sends again the value of a channel
// whose version did not change (all channels, or a retried put) must not
// have it written again: rewritten, the row would name the later run, and
// rolling that run back would take the value from the earlier checkpoints
// that still name it. A different value under the same version (a fork,
// where JavaScript savers reuse integer versions) still replaces it.
func TestHostCheckpointValueWrittenOnce(t *testing.T) {
	e := startEngine(t)
	th, err := e.CreateThread("", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	setActive := func(run string) {
		t.Helper()
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
	cp := func(id, parent, run string, versions map[string]string, blobs ...map[string]any) {
		t.Helper()
		p := put(id, parent, run, nil)
		p["thread_id"] = th.ThreadID
		p["channel_versions"] = versions
		p["blobs"] = blobs
		if _, err := call(t, e, "cp.put", p); err != nil {
			t.Fatal(err)
		}
	}
	get := func(id string) cpTuple {
		t.Helper()
		raw, _ := call(t, e, "cp.getTuple", map[string]any{"thread_id": th.ThreadID, "checkpoint_ns": "", "checkpoint_id": id})
		var tup cpTuple
		_ = json.Unmarshal(raw, &tup)
		return tup
	}
	blob := func(ch, v, val string) map[string]any {
		return map[string]any{"channel": ch, "version": v, "t": "json", "b": []byte(val)}
	}
	setActive("run-a")
	cp("1a", "", "run-a", map[string]string{"a": "1"}, blob("a", "1", `"a1"`))
	// run-b's checkpoint: b changed, a did not but is sent again.
	setActive("run-b")
	cp("1b", "1a", "run-b", map[string]string{"a": "1", "b": "2"}, blob("a", "1", `"a1"`), blob("b", "2", `"b2"`))
	if err := e.bolt().w.Update(func(tx *bolt.Tx) error { return deleteLG(&boltTx{tx: tx}, th.ThreadID, "run-b") }); err != nil {
		t.Fatal(err)
	}
	if tup := get("1a"); len(tup.Blobs) != 1 || string(tup.Blobs[0].B) != `"a1"` {
		t.Fatalf("after rolling back run-b, which resent a's unchanged value, 1a has lost it: %+v", tup.Blobs)
	}
	// A fork from 1a by run-c reusing version 1 of a for a new value.
	setActive("run-c")
	cp("1c", "1a", "run-c", map[string]string{"a": "1"}, blob("a", "1", `"edited"`))
	if tup := get("1c"); len(tup.Blobs) != 1 || string(tup.Blobs[0].B) != `"edited"` {
		t.Fatalf("a fork's new value under a reused version: %+v", tup.Blobs)
	}
}

// TestHostCheckpointRowsCompact: the serializer's bytes are stored as they
// are, not as base64 inside JSON (a third larger): a checkpoint, a channel
// value and a pending write of 3,000 bytes each take little more than that.
func TestHostCheckpointRowsCompact(t *testing.T) { testHostCheckpointRowsCompact(t, startEngine) }

func testHostCheckpointRowsCompact(t *testing.T, start func(*testing.T) *Engine) {
	e := start(t)
	big := bytes.Repeat([]byte{0xa5}, 3000)
	p := put("1a", "", "", nil)
	p["checkpoint"] = map[string]any{"t": "msgpack", "b": big}
	p["channel_versions"] = map[string]string{"a": "1"}
	p["blobs"] = []map[string]any{{"channel": "a", "version": "1", "t": "msgpack", "b": big}}
	if _, err := call(t, e, "cp.put", p); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, e, "cp.putWrites", map[string]any{"thread_id": "t1", "checkpoint_ns": "", "checkpoint_id": "1a", "task_id": "task",
		"writes": []map[string]any{{"channel": "c", "idx": 0, "t": "msgpack", "b": big}}}); err != nil {
		t.Fatal(err)
	}
	_ = e.DB.View(func(tx *bolt.Tx) error {
		n := 0
		return tx.Bucket([]byte(bLG)).ForEach(func(k, v []byte) error {
			n++
			if len(v) > 3200 {
				t.Errorf("row %q: %d bytes for a 3,000-byte value", k, len(v))
			}
			return nil
		})
	})
	raw, _ := call(t, e, "cp.getTuple", map[string]any{"thread_id": "t1", "checkpoint_ns": ""})
	var tup cpTuple
	_ = json.Unmarshal(raw, &tup)
	if !bytes.Equal(tup.Checkpoint.B, big) || len(tup.Blobs) != 1 || !bytes.Equal(tup.Blobs[0].B, big) || len(tup.Writes) != 1 || !bytes.Equal(tup.Writes[0].B, big) {
		t.Fatalf("values do not read back: %.200s", raw)
	}
}

// TestHostCheckpointCommitPages: a superstep's checkpoint and its new
// channel values are one thread's rows side by side, so their commit
// rewrites one path of one tree, not one per kind of row. With 300
// threads' checkpoints stored (trees several levels deep), a checkpoint
// with new values writes at most one page per level, one more for a split
// leaf, the root bucket's page, the freelist and the meta page (rows in
// three trees wrote a path in two of them).
func TestHostCheckpointCommitPages(t *testing.T) {
	e := startEngine(t)
	val := bytes.Repeat([]byte("x"), 300)
	for i := range 300 {
		p := put("1a", "", "", nil)
		p["thread_id"] = fmt.Sprintf("thread-%04d", i)
		p["checkpoint"] = map[string]any{"t": "json", "b": val}
		p["channel_versions"] = map[string]string{"a": "1", "b": "1"}
		p["blobs"] = []map[string]any{{"channel": "a", "version": "1", "t": "json", "b": val}, {"channel": "b", "version": "1", "t": "json", "b": val}}
		if _, err := call(t, e, "cp.put", p); err != nil {
			t.Fatal(err)
		}
	}
	p := put("1b", "1a", "", nil)
	p["thread_id"] = "thread-0150"
	p["checkpoint"] = map[string]any{"t": "json", "b": val}
	p["channel_versions"] = map[string]string{"a": "2", "b": "2"}
	p["blobs"] = []map[string]any{{"channel": "a", "version": "2", "t": "json", "b": val}, {"channel": "b", "version": "2", "t": "json", "b": val}}
	pages := func() int64 { s := e.DB.Stats(); return s.TxStats.GetWrite() }
	before := pages()
	if _, err := call(t, e, "cp.put", p); err != nil {
		t.Fatal(err)
	}
	// Pages one path holds: one per level of the deepest checkpoint tree.
	depth := 0
	_ = e.DB.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if bytes.HasPrefix(name, []byte("lg")) {
				depth = max(depth, b.Stats().Depth)
			}
			return nil
		})
	})
	if depth < 2 {
		t.Fatalf("trees %d deep: too few checkpoints to see paths", depth)
	}
	if n := pages() - before; n > int64(depth)+4 {
		t.Fatalf("one checkpoint's commit wrote %d pages, want at most %d (one path of %d levels, a split leaf, the root bucket, freelist, meta)", n, depth+4, depth)
	}
}
