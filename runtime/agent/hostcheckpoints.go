package agent

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Checkpoints of language-host graphs. The host's checkpointer (a
// LangGraph BaseCheckpointSaver) calls back into the engine over the host
// channel; everything it saves lives in the agent store's checkpoint rows
// (store_lg.go), keyed so that a thread's rows sort together:
//
//	thread ‖ 0 ‖ ns ‖ 0 ‖ c ‖ 0 ‖ checkpoint id                    → lgCheckpoint
//	thread ‖ 0 ‖ ns ‖ 0 ‖ b ‖ 0 ‖ channel ‖ 0 ‖ version            → lgBlob
//	thread ‖ 0 ‖ ns ‖ 0 ‖ w ‖ 0 ‖ checkpoint id ‖ 0 ‖ task id ‖ 0 ‖ idx (int32, sign flipped) → lgWrite
//
// (rows in lgrows.go's binary form, or JSON from before it). Checkpoint
// ids are UUIDv6, so a namespace's latest checkpoint is its last key.
// Channel values are stored once per (channel, version), as LangGraph's
// own savers store them: a checkpoint names the versions it sees, the
// saver sends only the values of channels whose version changed, and a
// value already stored under its (channel, version) is not written again. Every row records the run that wrote it, so
// a rolled-back run's rows go in the transaction that ends it, and a write
// from a run that is no longer its thread's active run is refused (fencing).
// Values are the host serializer's typed bytes; the engine never decodes
// them, except the metadata's JSON copy, which list filters read.
// Typed is a value as the host's serializer wrote it: a type tag and bytes
// (base64 on the wire).
type Typed struct {
	T string `json:"t"`
	B []byte `json:"b"`
}

type lgCheckpoint struct {
	RunID      string `json:"run_id,omitempty"`
	Parent     string `json:"parent_checkpoint_id,omitempty"`
	Checkpoint Typed  `json:"checkpoint"`
	Metadata   Typed  `json:"metadata"`
	// MetadataJSON is the metadata as JSON, which list filters read: kept
	// as the host sent it (an object), decoded only by a filter.
	MetadataJSON    json.RawMessage   `json:"metadata_json,omitempty"`
	ChannelVersions map[string]string `json:"channel_versions"`
}

type lgBlob struct {
	RunID string `json:"run_id,omitempty"`
	Typed
}

type lgWrite struct {
	RunID    string `json:"run_id,omitempty"`
	TaskID   string `json:"task_id"`
	TaskPath string `json:"task_path"`
	Channel  string `json:"channel"`
	Idx      int32  `json:"idx"`
	Typed
}

// ErrFenced refuses a checkpoint write from a run that no longer holds its thread.
var ErrFenced = errors.New("checkpoint write refused")

func lgKey(parts ...string) []byte {
	return []byte(strings.Join(parts, "\x00"))
}

func idxBytes(i int32) []byte {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(i)^0x80000000) // negatives sort first
	return b[:]
}

func checkKeyPart(name, v string) error {
	if strings.ContainsRune(v, 0) {
		return fmt.Errorf("%w: %s must not contain NUL", ErrInvalid, name)
	}
	return nil
}

// fence allows a write for thread by run: a run's writes only while it is
// the thread's active run; writes outside any run (update_state) only
// while the thread has no run. Threads the engine does not know (a
// checkpointer used outside a run, as the conformance suite does) take
// writes outside runs only.
func fence(tx Tx, threadID, runID string) error {
	active, queue, err := tx.ThreadQueue(threadID)
	if errors.Is(err, ErrNotFound) {
		if runID != "" {
			return fmt.Errorf("%w: thread %s no longer exists", ErrFenced, threadID)
		}
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case runID != "" && active != runID:
		return fmt.Errorf("%w: run %s is no longer the active run of thread %s", ErrFenced, runID, threadID)
	case runID == "" && (active != "" || len(queue) > 0):
		return fmt.Errorf("%w: thread %s has a pending or running run", ErrFenced, threadID)
	}
	return nil
}

type cpPut struct {
	RunID           string            `json:"run_id"`
	ThreadID        string            `json:"thread_id"`
	NS              string            `json:"checkpoint_ns"`
	CheckpointID    string            `json:"checkpoint_id"`
	Parent          string            `json:"parent_checkpoint_id"`
	Checkpoint      Typed             `json:"checkpoint"`
	Metadata        Typed             `json:"metadata"`
	MetadataJSON    json.RawMessage   `json:"metadata_json"`
	ChannelVersions map[string]string `json:"channel_versions"`
	Blobs           []struct {
		Channel string `json:"channel"`
		Version string `json:"version"`
		Typed
	} `json:"blobs"`
}

type cpPutWrites struct {
	RunID        string `json:"run_id"`
	ThreadID     string `json:"thread_id"`
	NS           string `json:"checkpoint_ns"`
	CheckpointID string `json:"checkpoint_id"`
	TaskID       string `json:"task_id"`
	TaskPath     string `json:"task_path"`
	Writes       []struct {
		Channel string `json:"channel"`
		Idx     int32  `json:"idx"`
		Typed
	} `json:"writes"`
}

type cpQuery struct {
	ThreadID     *string        `json:"thread_id"`
	NS           *string        `json:"checkpoint_ns"`
	CheckpointID string         `json:"checkpoint_id"`
	Before       string         `json:"before"`
	Filter       map[string]any `json:"filter"`
	Limit        int            `json:"limit"`
}

// cpTuple is a checkpoint as the host's saver reads it back.
type cpTuple struct {
	ThreadID     string `json:"thread_id"`
	NS           string `json:"checkpoint_ns"`
	CheckpointID string `json:"checkpoint_id"`
	Parent       string `json:"parent_checkpoint_id,omitempty"`
	Checkpoint   Typed  `json:"checkpoint"`
	Metadata     Typed  `json:"metadata"`
	Blobs        []struct {
		Channel string `json:"channel"`
		Typed
	} `json:"blobs"`
	Writes []lgWrite `json:"writes"`
}

// hostRequest serves the host's checkpointer and store.
func (e *Engine) hostRequest(_ context.Context, method string, p json.RawMessage) (any, error) {
	switch method {
	case "http.start", "http.chunk", "http.read":
		return e.httpStreamRequest(method, p)
	case "cp.put":
		var in cpPut
		if err := json.Unmarshal(p, &in); err != nil {
			return nil, err
		}
		start := time.Now()
		err := e.cpPut(&in)
		if err == nil {
			e.Metrics.checkpointWritten(start)
		}
		return nil, err
	case "cp.putWrites":
		var in cpPutWrites
		if err := json.Unmarshal(p, &in); err != nil {
			return nil, err
		}
		return nil, e.cpPutWrites(&in)
	case "cp.getTuple":
		var in struct {
			ThreadID     string `json:"thread_id"`
			NS           string `json:"checkpoint_ns"`
			CheckpointID string `json:"checkpoint_id"`
		}
		if err := json.Unmarshal(p, &in); err != nil {
			return nil, err
		}
		var out *cpTuple
		err := e.store.ViewCheckpointRows(context.Background(), in.ThreadID, func(lg checkpointRows) error {
			var err error
			out, err = getTuple(lg, in.ThreadID, in.NS, in.CheckpointID)
			return err
		})
		return out, err
	case "cp.list":
		var in cpQuery
		if err := json.Unmarshal(p, &in); err != nil {
			return nil, err
		}
		// With every acknowledged write of one thread, or of all.
		thread := ""
		if in.ThreadID != nil {
			thread = *in.ThreadID
		}
		var out []*cpTuple
		err := e.store.ViewCheckpointRows(context.Background(), thread, func(lg checkpointRows) error {
			var err error
			out, err = listTuples(lg, &in)
			return err
		})
		if out == nil {
			out = []*cpTuple{}
		}
		return out, err
	case "cp.deleteThread":
		var in struct {
			ThreadID string `json:"thread_id"`
		}
		if err := json.Unmarshal(p, &in); err != nil {
			return nil, err
		}
		return nil, e.store.Update(context.Background(), func(tx Tx) error { return deleteLG(tx, in.ThreadID, "") })
	}
	if strings.HasPrefix(method, "store.") {
		return e.hostStore(method, p)
	}
	return nil, fmt.Errorf("unknown method %q", method)
}

func (e *Engine) cpPut(in *cpPut) error {
	for _, kv := range [][2]string{{"thread_id", in.ThreadID}, {"checkpoint_ns", in.NS}, {"checkpoint_id", in.CheckpointID}} {
		if err := checkKeyPart(kv[0], kv[1]); err != nil {
			return err
		}
	}
	if in.ThreadID == "" || in.CheckpointID == "" {
		return fmt.Errorf("%w: a checkpoint needs a thread_id and an id", ErrInvalid)
	}
	meta, err := metadataObject(in.MetadataJSON)
	if err != nil {
		return err
	}
	rows := make([]cpRow, 0, len(in.Blobs)+1)
	for _, b := range in.Blobs {
		if err := checkKeyPart("channel", b.Channel); err != nil {
			return err
		}
		rows = append(rows, cpRow{rowPutChanged, lgKey(in.ThreadID, in.NS, lgKindBlob, b.Channel, b.Version),
			encodeBlob(&lgBlob{RunID: in.RunID, Typed: b.Typed})})
	}
	row := encodeCheckpoint(&lgCheckpoint{RunID: in.RunID, Parent: in.Parent, Checkpoint: in.Checkpoint, Metadata: in.Metadata,
		MetadataJSON: meta, ChannelVersions: in.ChannelVersions})
	rows = append(rows, cpRow{rowPut, lgKey(in.ThreadID, in.NS, lgKindCheckpoint, in.CheckpointID), row})
	return e.store.PutCheckpointRows(e.claimContext(context.Background(), in.RunID), in.ThreadID, in.RunID, rows)
}

// metadataMatches says whether the checkpoint's metadata holds filter's
// entries (list's filter argument).
func (c *lgCheckpoint) metadataMatches(filter map[string]any) (bool, error) {
	var meta map[string]any
	if len(c.MetadataJSON) > 0 {
		if err := json.Unmarshal(c.MetadataJSON, &meta); err != nil {
			return false, fmt.Errorf("decode checkpoint metadata: %w", err)
		}
	}
	return matches(meta, filter), nil
}

// metadataObject checks that a checkpoint's metadata JSON is an object
// (or absent: nil). The frame's decoder has checked that it is JSON; it
// is stored as sent, not decoded into a map and encoded again for every
// checkpoint (part of decoding the host's frames, a sixth of the agent's
// CPU under load), and only a list filter decodes it.
func metadataObject(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return nil, nil
	case raw[0] != '{':
		return nil, fmt.Errorf("%w: metadata_json must be an object", ErrInvalid)
	}
	return raw, nil
}

func (e *Engine) cpPutWrites(in *cpPutWrites) error {
	for _, kv := range [][2]string{{"thread_id", in.ThreadID}, {"checkpoint_ns", in.NS}, {"checkpoint_id", in.CheckpointID}, {"task_id", in.TaskID}} {
		if err := checkKeyPart(kv[0], kv[1]); err != nil {
			return err
		}
	}
	if in.ThreadID == "" || in.CheckpointID == "" {
		return fmt.Errorf("%w: writes need a thread_id and a checkpoint_id", ErrInvalid)
	}
	rows := make([]cpRow, 0, len(in.Writes))
	for _, w := range in.Writes {
		// A task's regular writes are saved once (a retried task must
		// not replace them); special writes (error, interrupt, resume…)
		// have fixed negative indexes and replace.
		mode := rowPutNew
		if w.Idx < 0 {
			mode = rowPut
		}
		row := lgWrite{RunID: in.RunID, TaskID: in.TaskID, TaskPath: in.TaskPath, Channel: w.Channel, Idx: w.Idx, Typed: w.Typed}
		rows = append(rows, cpRow{mode, append(lgKey(in.ThreadID, in.NS, lgKindWrite, in.CheckpointID, in.TaskID, ""), idxBytes(w.Idx)...),
			encodeWrite(&row)})
	}
	return e.store.PutCheckpointRows(e.claimContext(context.Background(), in.RunID), in.ThreadID, in.RunID, rows)
}

// deleteLG deletes a thread's host checkpoints: all of them, or only
// those a run wrote (a rollback).
func deleteLG(tx Tx, thread, runID string) error {
	var keys [][]byte
	err := tx.ScanCheckpointRows(lgKey(thread, ""), func(k, v []byte) bool {
		if runID != "" {
			if id, err := rowRunID(v); err != nil || id != runID {
				return true
			}
		}
		keys = append(keys, storageCopy(k))
		return true
	})
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := tx.DeleteCheckpointRow(k); err != nil {
			return err
		}
	}
	return nil
}

// copyLG copies a thread's host checkpoints to another thread.
func copyLG(tx Tx, from, to string) error {
	prefix := lgKey(from, "")
	type kv struct{ k, v []byte }
	var rows []kv
	err := tx.ScanCheckpointRows(prefix, func(k, v []byte) bool {
		rows = append(rows, kv{append(lgKey(to, ""), k[len(prefix):]...), storageCopy(v)})
		return true
	})
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := tx.PutCheckpointRow(r.k, r.v); err != nil {
			return err
		}
	}
	return nil
}

// hostStore serves the host's BaseStore (store.mjs) from the same store
// the /store API serves.
func (e *Engine) hostStore(method string, p json.RawMessage) (any, error) {
	var in struct {
		Namespace []string       `json:"namespace"`
		Key       string         `json:"key"`
		Value     map[string]any `json:"value"`
		Prefix    []string       `json:"namespace_prefix"`
		NSPrefix  []string       `json:"prefix"`
		Filter    map[string]any `json:"filter"`
		Query     string         `json:"query"`
		MaxDepth  int            `json:"max_depth"`
		Limit     int            `json:"limit"`
		Offset    int            `json:"offset"`
	}
	if err := json.Unmarshal(p, &in); err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	switch method {
	case "store.get":
		it, err := e.GetItem(in.Namespace, in.Key)
		if errors.Is(err, ErrNotFound) {
			return nil, nil
		}
		return it, err
	case "store.put":
		if in.Value == nil {
			return nil, fmt.Errorf("%w: store.put: value must be an object", ErrInvalid)
		}
		return nil, e.PutItem(in.Namespace, in.Key, in.Value)
	case "store.delete":
		return nil, e.DeleteItem(in.Namespace, in.Key)
	case "store.search":
		return e.SearchItems(in.Prefix, in.Filter, in.Query, max(in.Limit, 1), max(in.Offset, 0))
	case "store.listNamespaces":
		return e.ListNamespaces(in.NSPrefix, in.MaxDepth, max(in.Limit, 1), max(in.Offset, 0))
	}
	return nil, fmt.Errorf("unknown method %q", method)
}
