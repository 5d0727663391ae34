package controlplane

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

const (
	// bucketRevisionLogs holds build and deploy lines: revision ‖ uint64
	// seq → LogEntry, one sequence shared by every revision.
	bucketRevisionLogs = "revision_logs"
	// bucketAgentLogs holds one nested bucket per deployment, a ring of
	// its agent output: uint64 seq → LogEntry, and agentLogSize → the
	// bytes the entries hold.
	bucketAgentLogs = "agent_logs"
)

// agentLogSize is the key of a ring's byte count; entry keys are 8 bytes,
// so it never collides with one.
var agentLogSize = []byte("size")

// appendLog writes one log line of a revision in the caller's transaction.
func appendLog(tx *bolt.Tx, revID string, e LogEntry) error {
	_, err := appendLogID(tx, revID, e)
	return err
}

// appendLogID writes one log line of a revision and returns its id.
func appendLogID(tx *bolt.Tx, revID string, e LogEntry) (int64, error) {
	b := tx.Bucket([]byte(bucketRevisionLogs))
	seq, err := b.NextSequence()
	if err != nil {
		return 0, err
	}
	e.ID = int64(seq)
	return e.ID, storage.Put(tx, bucketRevisionLogs, storage.Key(uuid.MustParse(revID), storage.U64(seq)), &e)
}

// readRevisionLogs returns a revision's build and deploy lines after id
// after, oldest first, those of the given phases only (all when nil). With
// a budget (bytes of stored lines, 0 for none) it stops once the lines it
// returns hold that much, and full says more may follow.
func readRevisionLogs(tx *bolt.Tx, rid uuid.UUID, after int64, phases map[string]bool, budget int) (out []LogEntry, full bool, err error) {
	c := tx.Bucket([]byte(bucketRevisionLogs)).Cursor()
	prefix := storage.Key(rid)
	used := 0
	for k, v := c.Seek(storage.Key(rid, storage.U64(uint64(after+1)))); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if budget > 0 && used >= budget {
			return out, true, nil
		}
		var e LogEntry
		if err := json.Unmarshal(v, &e); err != nil {
			return nil, false, err
		}
		if phases == nil || phases[e.Phase] {
			out = append(out, e)
			used += len(v)
		}
	}
	return out, false, nil
}

// deleteRevisionLogs removes a revision's build and deploy lines.
func deleteRevisionLogs(tx *bolt.Tx, rid uuid.UUID) error {
	b := tx.Bucket([]byte(bucketRevisionLogs))
	prefix := storage.Key(rid)
	var keys [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, storage.Copy(k))
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// appendAgentLog adds one line to a deployment's ring and drops the oldest
// lines while the ring holds more than limit bytes (the newest line always
// stays). It returns the line's sequence number.
func appendAgentLog(tx *bolt.Tx, dep uuid.UUID, e LogEntry, limit int) (uint64, error) {
	b, err := tx.Bucket([]byte(bucketAgentLogs)).CreateBucketIfNotExists(storage.Key(dep))
	if err != nil {
		return 0, err
	}
	seq, err := b.NextSequence()
	if err != nil {
		return 0, err
	}
	e.ID = int64(seq)
	raw, err := json.Marshal(e)
	if err != nil {
		return 0, err
	}
	if err := b.Put(storage.U64(seq), raw); err != nil {
		return 0, err
	}
	size := uint64(len(raw))
	if v := b.Get(agentLogSize); len(v) == 8 {
		size += binary.BigEndian.Uint64(v)
	}
	size, err = trimRing(b, size, uint64(limit), seq)
	if err != nil {
		return 0, err
	}
	return seq, b.Put(agentLogSize, storage.U64(size))
}

// trimRing deletes a ring's oldest entries, never the newest (keep), while
// it holds more than limit bytes, and returns what it holds then.
func trimRing(b *bolt.Bucket, size, limit, keep uint64) (uint64, error) {
	if size <= limit {
		return size, nil
	}
	var old [][]byte
	c := b.Cursor()
	for k, v := c.First(); k != nil && size > limit; k, v = c.Next() {
		if len(k) != 8 || binary.BigEndian.Uint64(k) == keep {
			break
		}
		size -= uint64(len(v))
		old = append(old, storage.Copy(k))
	}
	for _, k := range old {
		if err := b.Delete(k); err != nil {
			return 0, err
		}
	}
	return size, nil
}

// readAgentLogs returns a deployment's agent output after sequence number
// after, oldest first: one revision's (rev non-nil) or all; with a budget
// as readRevisionLogs.
func readAgentLogs(tx *bolt.Tx, dep uuid.UUID, rev *uuid.UUID, after int64, budget int) (out []LogEntry, full bool, err error) {
	b := tx.Bucket([]byte(bucketAgentLogs)).Bucket(storage.Key(dep))
	if b == nil {
		return nil, false, nil
	}
	used := 0
	c := b.Cursor()
	for k, v := c.Seek(storage.U64(uint64(after + 1))); k != nil; k, v = c.Next() {
		if len(k) != 8 {
			continue
		}
		if budget > 0 && used >= budget {
			return out, true, nil
		}
		var e LogEntry
		if err := json.Unmarshal(v, &e); err != nil {
			return nil, false, fmt.Errorf("agent log %x: %w", k, err)
		}
		if rev == nil || e.RevisionID == rev.String() {
			out = append(out, e)
			used += len(v)
		}
	}
	return out, false, nil
}

// agentLogRing returns the byte count a deployment's ring records and the
// bytes its entries hold (for tests of the ring's accounting).
func agentLogRing(tx *bolt.Tx, dep uuid.UUID) (recorded, held uint64) {
	b := tx.Bucket([]byte(bucketAgentLogs)).Bucket(storage.Key(dep))
	if b == nil {
		return 0, 0
	}
	recorded = storage.U64ToInt(b.Get(agentLogSize))
	_ = b.ForEach(func(k, v []byte) error {
		if len(k) == 8 {
			held += uint64(len(v))
		}
		return nil
	})
	return recorded, held
}

// deleteAgentLogs removes a deployment's ring, in the transaction that
// deletes the deployment.
func deleteAgentLogs(tx *bolt.Tx, dep uuid.UUID) error {
	err := tx.Bucket([]byte(bucketAgentLogs)).DeleteBucket(storage.Key(dep))
	if errors.Is(err, bolt.ErrBucketNotFound) {
		return nil
	}
	return err
}
