package agent

import (
	"fmt"
	"sort"
	"strings"
)

// Reading host checkpoints back: the tuples the host's saver gets and
// lists (BaseCheckpointSaver.get_tuple and list), assembled from the
// checkpoint rows of one thread.

// getTuple returns a checkpoint (the namespace's latest when id is empty) or nil.
func getTuple(lg checkpointRows, thread, ns, id string) (*cpTuple, error) {
	var k, v []byte
	if id != "" {
		k = lgKey(thread, ns, lgKindCheckpoint, id)
		v = lg.get(k)
	} else {
		// Namespaces never contain NUL, so every key under this prefix is
		// one of the namespace's checkpoints, the latest last (UUIDv6).
		k, v = lg.last(lgKey(thread, ns, lgKindCheckpoint, ""))
	}
	if v == nil {
		return nil, nil
	}
	return assemble(lg, thread, ns, string(k[len(lgKey(thread, ns, lgKindCheckpoint, "")):]), v)
}

func storageCopy(b []byte) []byte { return append([]byte(nil), b...) }

func assemble(lg checkpointRows, thread, ns, id string, raw []byte) (*cpTuple, error) {
	row, err := decodeCheckpoint(raw, false)
	if err != nil {
		return nil, fmt.Errorf("decode checkpoint %s: %w", id, err)
	}
	t := &cpTuple{ThreadID: thread, NS: ns, CheckpointID: id, Parent: row.Parent, Checkpoint: row.Checkpoint, Metadata: row.Metadata,
		Writes: []lgWrite{}}
	channels := make([]string, 0, len(row.ChannelVersions))
	for ch := range row.ChannelVersions {
		channels = append(channels, ch)
	}
	sort.Strings(channels)
	for _, ch := range channels {
		bv := lg.get(lgKey(thread, ns, lgKindBlob, ch, row.ChannelVersions[ch]))
		if bv == nil {
			continue
		}
		blob, err := decodeBlob(bv)
		if err != nil {
			return nil, fmt.Errorf("decode channel %s: %w", ch, err)
		}
		t.Blobs = append(t.Blobs, struct {
			Channel string `json:"channel"`
			Typed
		}{ch, blob.Typed})
	}
	var werr error
	lg.scan(lgKey(thread, ns, lgKindWrite, id, ""), func(_, v []byte) bool {
		w, err := decodeWrite(v)
		if err != nil {
			werr = fmt.Errorf("decode pending write: %w", err)
			return false
		}
		w.RunID = ""
		t.Writes = append(t.Writes, *w)
		return true
	})
	if werr != nil {
		return nil, werr
	}
	return t, nil
}

// listTuples lists checkpoints newest first (by id) as BaseCheckpointSaver.list does.
func listTuples(lg checkpointRows, q *cpQuery) ([]*cpTuple, error) {
	if q.ThreadID != nil && q.NS != nil && q.CheckpointID == "" {
		return listNamespace(lg, *q.ThreadID, *q.NS, q)
	}
	type hit struct {
		thread, ns, id string
		raw            []byte
	}
	var hits []hit
	var prefix []byte
	switch {
	case q.ThreadID != nil && q.NS != nil:
		prefix = lgKey(*q.ThreadID, *q.NS, lgKindCheckpoint, "")
	case q.ThreadID != nil:
		prefix = lgKey(*q.ThreadID, "")
	}
	var serr error
	lg.scan(prefix, func(k, v []byte) bool {
		parts := strings.SplitN(string(k), "\x00", 4)
		if len(parts) != 4 || parts[2] != lgKindCheckpoint {
			return true
		}
		thread, ns, id := parts[0], parts[1], parts[3]
		if q.NS != nil && ns != *q.NS || q.CheckpointID != "" && id != q.CheckpointID || q.Before != "" && id >= q.Before {
			return true
		}
		if len(q.Filter) > 0 {
			row, err := decodeCheckpoint(v, true)
			if err != nil {
				serr = err
				return false
			}
			if ok, err := row.metadataMatches(q.Filter); err != nil || !ok {
				serr = err
				return err == nil
			}
		}
		hits = append(hits, hit{thread, ns, id, v})
		return true
	})
	if serr != nil {
		return nil, serr
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].id > hits[j].id })
	if q.Limit > 0 && len(hits) > q.Limit {
		hits = hits[:q.Limit]
	}
	out := make([]*cpTuple, 0, len(hits))
	for _, h := range hits {
		t, err := assemble(lg, h.thread, h.ns, h.id, h.raw)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// listNamespace lists one namespace's checkpoints (a thread's history):
// its checkpoint rows sort by id, so the page is read newest first by a
// reverse seek from before, stopping at limit rows that match the
// filter, instead of loading the thread's rows and sorting them.
func listNamespace(lg checkpointRows, thread, ns string, q *cpQuery) ([]*cpTuple, error) {
	prefix := lgKey(thread, ns, lgKindCheckpoint, "")
	var below []byte
	if q.Before != "" {
		below = lgKey(thread, ns, lgKindCheckpoint, q.Before)
	}
	out := []*cpTuple{}
	var serr error
	lg.scanBack(prefix, below, func(k, v []byte) bool {
		id := string(k[len(prefix):])
		if len(q.Filter) > 0 {
			row, err := decodeCheckpoint(v, true)
			if err != nil {
				serr = err
				return false
			}
			if ok, err := row.metadataMatches(q.Filter); err != nil || !ok {
				serr = err
				return err == nil
			}
		}
		t, err := assemble(lg, thread, ns, id, storageCopy(v))
		if err != nil {
			serr = err
			return false
		}
		out = append(out, t)
		return q.Limit <= 0 || len(out) < q.Limit
	})
	return out, serr
}
