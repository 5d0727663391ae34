package agent

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Thread indexes: what thread search, count and start-up read instead of
// decoding every thread record. They are written by whatever writes a
// thread record (PutThread, DeleteThreadRecord), in the same transaction,
// from the record's old and new indexed fields; every key ends in the
// thread's id, so a journaled unit of work (UpdateThread) may write them
// as the thread's own rows and the journal carries them with the record.
//
//	idx_threads_created  created ‖ id → nil
//	idx_threads_updated  updated ‖ id → nil
//	idx_threads_status   status ‖ 0x00 ‖ created ‖ id → nil
//	idx_threads_meta     metaPrefix(key, value) ‖ created ‖ id → nil, for
//	                     top-level metadata values that are strings,
//	                     numbers or booleans (metaIndexable)
//	idx_threads_attr     id → created ‖ updated ‖ status, what a search
//	                     walking another order tests without decoding
//	idx_threads_busy     id → nil, threads with a running or queued run
//
// Times are 8-byte big-endian keys (timeKey), so byte order is time order.
// Status and metadata postings are in created ‖ id order, the default
// sort's, so filters combine by intersecting them (store_threadsearch.go).
const (
	bThreadsCreated = "idx_threads_created"
	bThreadsUpdated = "idx_threads_updated"
	bThreadsStatus  = "idx_threads_status"
	bThreadsMeta    = "idx_threads_meta"
	bThreadsAttr    = "idx_threads_attr"
	bThreadsBusy    = "idx_threads_busy"
)

var threadIndexBuckets = []string{bThreadsCreated, bThreadsUpdated, bThreadsStatus, bThreadsMeta, bThreadsAttr, bThreadsBusy}

// Metadata entries longer than these are not indexed (a bbolt key is at
// most 32 KiB, and long values make every posting key long); a filter on
// one is tested on the records instead (metaIndexable decides both).
const (
	maxMetaKeyLen   = 256
	maxMetaValueLen = 512
)

// threadDecodes counts thread records decoded by the store: tests assert
// that a search decodes O(limit) of them.
var threadDecodes atomic.Int64

// decodeThread decodes a stored thread record.
func decodeThread(raw []byte) (*threadRecord, error) {
	threadDecodes.Add(1)
	var r threadRecord
	if err := unmarshalStored(raw, &r); err != nil {
		return nil, fmt.Errorf("decode thread: %w", err)
	}
	return &r, nil
}

// timeKey is t as 8 bytes whose byte order is time order.
func timeKey(t time.Time) []byte {
	var ns int64
	switch y := t.Year(); {
	case y < 1678:
		ns = math.MinInt64
	case y > 2261:
		ns = math.MaxInt64
	default:
		ns = t.UnixNano()
	}
	return binary.BigEndian.AppendUint64(nil, uint64(ns)^1<<63)
}

// metaValue is v's canonical JSON (what metadata filters compare, see
// matches) when v is an indexed scalar: false for objects, arrays, null
// and values too long to index.
func metaValue(v any) ([]byte, bool) {
	b, err := json.Marshal(v)
	if err != nil || len(b) == 0 || len(b) > maxMetaValueLen {
		return nil, false
	}
	switch b[0] {
	case '{', '[', 'n':
		// null is not indexed: a filter {"k": null} also matches threads
		// without k (matches), which no posting lists.
		return nil, false
	}
	return b, true
}

// metaPrefix is the posting prefix of metadata key k with value v (its
// canonical JSON): both length-prefixed, so no key or value can run into
// the next.
func metaPrefix(k string, v []byte) []byte {
	b := binary.AppendUvarint(nil, uint64(len(k)))
	b = append(b, k...)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// metaIndexable reports whether a metadata filter entry has a posting.
func metaIndexable(k string, v any) ([]byte, bool) {
	if len(k) > maxMetaKeyLen {
		return nil, false
	}
	return metaValue(v)
}

// threadIndexed is what the indexes hold of a thread, decoded from a
// stored record without its values.
type threadIndexed struct {
	ThreadID  string         `json:"thread_id"`
	CreatedAt time.Time      `json:"created_at"`
	UpdatedAt time.Time      `json:"updated_at"`
	Status    string         `json:"status"`
	Metadata  map[string]any `json:"metadata"`
	Active    string         `json:"active"`
	Queue     []string       `json:"queue"`
}

func indexedOf(r *threadRecord) *threadIndexed {
	return &threadIndexed{ThreadID: r.ThreadID, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Status: r.Status,
		Metadata: r.Metadata, Active: r.Active, Queue: r.Queue}
}

// idxRow is one index row of a thread.
type idxRow struct {
	bucket   string
	key, val []byte
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// threadIndexRows are the index rows of x.
func threadIndexRows(x *threadIndexed) []idxRow {
	id := []byte(x.ThreadID)
	created, updated := timeKey(x.CreatedAt), timeKey(x.UpdatedAt)
	doc := cat(created, id)
	rows := []idxRow{
		{bThreadsCreated, doc, nil},
		{bThreadsUpdated, cat(updated, id), nil},
		{bThreadsStatus, cat([]byte(x.Status), []byte{0}, doc), nil},
		{bThreadsAttr, id, cat(created, updated, []byte(x.Status))},
	}
	if x.Active != "" || len(x.Queue) > 0 {
		rows = append(rows, idxRow{bThreadsBusy, id, nil})
	}
	for k, v := range x.Metadata {
		if enc, ok := metaIndexable(k, v); ok {
			rows = append(rows, idxRow{bThreadsMeta, cat(metaPrefix(k, enc), doc), nil})
		}
	}
	return rows
}

// oldIndexed decodes the indexed fields of a stored record (nil: none).
func oldIndexed(raw []byte) (*threadIndexed, error) {
	if raw == nil {
		return nil, nil
	}
	var x threadIndexed
	if err := unmarshalStored(raw, &x); err != nil {
		return nil, fmt.Errorf("decode thread index fields: %w", err)
	}
	return &x, nil
}

// storedIndexed is what the indexes hold of thread id, whose stored
// record is raw (nil: none). A record that no longer decodes is still
// replaced or deleted: its rows are found from its attributes row, all
// but its metadata postings (which then name a thread a search skips).
func (t *boltTx) storedIndexed(id string, raw []byte) *threadIndexed {
	if raw == nil {
		return nil
	}
	if x, err := oldIndexed(raw); err == nil {
		return x
	}
	x := &threadIndexed{ThreadID: id}
	v := t.tx.Bucket([]byte(bThreadsAttr)).Get([]byte(id))
	if len(v) < 16 {
		return x
	}
	x.CreatedAt, x.UpdatedAt, x.Status = fromTimeKey(v[:8]), fromTimeKey(v[8:16]), string(v[16:])
	x.Active = "?" // its busy row, if any, goes too
	return x
}

// fromTimeKey inverts timeKey.
func fromTimeKey(b []byte) time.Time {
	return time.Unix(0, int64(binary.BigEndian.Uint64(b)^1<<63)).UTC()
}

// reindexThread replaces the index rows of a thread whose record was old
// (nil: it did not exist) by those of next (nil: it is deleted), writing
// only the rows that change.
func (t *boltTx) reindexThread(old, next *threadIndexed) error {
	var before, after []idxRow
	if old != nil {
		before = threadIndexRows(old)
	}
	if next != nil {
		after = threadIndexRows(next)
	}
	return writeIndexDiff(t.tx, before, after, t.touched)
}

func writeIndexDiff(tx *bolt.Tx, before, after []idxRow, touched func(string, []byte)) error {
	type bk struct{ bucket, key string }
	kept := make(map[bk][]byte, len(after))
	for _, r := range after {
		kept[bk{r.bucket, string(r.key)}] = r.val
	}
	had := make(map[bk][]byte, len(before))
	for _, r := range before {
		had[bk{r.bucket, string(r.key)}] = r.val
		if _, ok := kept[bk{r.bucket, string(r.key)}]; ok {
			continue
		}
		if err := tx.Bucket([]byte(r.bucket)).Delete(r.key); err != nil {
			return fmt.Errorf("delete %s row: %w", r.bucket, err)
		}
		touched(r.bucket, r.key)
	}
	for _, r := range after {
		if v, ok := had[bk{r.bucket, string(r.key)}]; ok && bytes.Equal(v, r.val) {
			continue
		}
		b := tx.Bucket([]byte(r.bucket))
		if r.bucket == bThreadsCreated {
			b.FillPercent = 0.9 // appended in creation order
		}
		if err := b.Put(r.key, r.val); err != nil {
			return fmt.Errorf("put %s row: %w", r.bucket, err)
		}
		touched(r.bucket, r.key)
	}
	return nil
}

// buildThreadIndexes creates the index buckets and fills them from every
// thread record (the migration, and replay of records journaled without
// them, below).
func buildThreadIndexes(tx *bolt.Tx) error {
	for _, name := range threadIndexBuckets {
		if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
			return fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	return tx.Bucket([]byte(bThreads)).ForEach(func(_, v []byte) error {
		x, err := oldIndexed(v)
		if err != nil {
			return err
		}
		return writeIndexDiff(tx, nil, threadIndexRows(x), func(string, []byte) {})
	})
}

// replayThreadRows applies a journal record's rows and re-derives the
// index rows of the threads whose records they write: a journal written
// before the indexes existed holds records without their index rows, and
// for one written since, deriving them again changes nothing.
func replayThreadRows(tx *bolt.Tx, rows []wbRow) error {
	threads := tx.Bucket([]byte(bThreads))
	old := map[string]*threadIndexed{}
	seen := map[string]bool{}
	for _, r := range rows {
		if r.bucket != bThreads || seen[string(r.key)] {
			continue
		}
		seen[string(r.key)] = true
		x, err := oldIndexed(threads.Get(r.key))
		if err != nil {
			return err
		}
		old[string(r.key)] = x
	}
	if err := applyRows(tx, rows); err != nil {
		return err
	}
	for id := range seen {
		next, err := oldIndexed(threads.Get([]byte(id)))
		if err != nil {
			return err
		}
		// The rows just applied may hold these index rows already; the
		// diff deletes and puts them again, to the same end.
		if err := writeIndexDiff(tx, rowsOf(old[id]), rowsOf(next), func(string, []byte) {}); err != nil {
			return err
		}
	}
	return nil
}

func rowsOf(x *threadIndexed) []idxRow {
	if x == nil {
		return nil
	}
	return threadIndexRows(x)
}
