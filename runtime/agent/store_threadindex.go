package agent

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
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
//	idx_threads_attr     id → created ‖ updated ‖ busy ‖ status ‖ metadata
//	                     prefixes (encodeThreadAttr): what a search walking
//	                     another order tests, and what a write reads to
//	                     replace the rows, without decoding the record
//	idx_threads_busy     id → nil, threads with a running or queued run
//	idx_threads_count    "total" and "status:<status>" → int64 counters, what
//	                     an unfiltered or status-only count reads; a
//	                     journaled unit journals their deltas (rowAdd)
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
	bThreadsCount   = "idx_threads_count"
)

var threadIndexBuckets = []string{bThreadsCreated, bThreadsUpdated, bThreadsStatus, bThreadsMeta, bThreadsAttr, bThreadsBusy, bThreadsCount}

// The counters' keys: every thread, and the threads of one status.
var countTotal = []byte("total")

func countStatus(status string) []byte { return []byte("status:" + status) }

// addCounter adds d to the int64 counter at key (absent: 0).
func addCounter(b *bolt.Bucket, key []byte, d int64) error {
	var n int64
	if v := b.Get(key); len(v) == 8 {
		n = int64(binary.BigEndian.Uint64(v))
	}
	if n+d == 0 {
		// Absent is zero: a status no thread has leaves no row.
		if err := b.Delete(key); err != nil {
			return fmt.Errorf("count threads: %w", err)
		}
		return nil
	}
	if err := b.Put(key, binary.BigEndian.AppendUint64(nil, uint64(n+d))); err != nil {
		return fmt.Errorf("count threads: %w", err)
	}
	return nil
}

// readCounter reads the counter at key (0 when absent).
func readCounter(tx *bolt.Tx, key []byte) int {
	if v := tx.Bucket([]byte(bThreadsCount)).Get(key); len(v) == 8 {
		return int(int64(binary.BigEndian.Uint64(v)))
	}
	return 0
}

// countDeltas are the counter changes from a thread's index rows before
// to after (nil: no thread).
func countDeltas(before, after []idxRow) map[string]int64 {
	d := map[string]int64{}
	for _, side := range []struct {
		rows []idxRow
		sign int64
	}{{before, -1}, {after, 1}} {
		for _, r := range side.rows {
			if r.bucket != bThreadsAttr {
				continue
			}
			if a, ok := decodeThreadAttr(r.val); ok {
				d[string(countTotal)] += side.sign
				d[string(countStatus(a.status))] += side.sign
			}
		}
	}
	return d
}

// applyCounts adds the deltas to the counters, reporting each to added.
func applyCounts(tx *bolt.Tx, d map[string]int64, added func(string, []byte, int64)) error {
	b := tx.Bucket([]byte(bThreadsCount))
	for k, v := range d {
		if v == 0 {
			continue
		}
		if err := addCounter(b, []byte(k), v); err != nil {
			return err
		}
		added(bThreadsCount, []byte(k), v)
	}
	return nil
}

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
	var metas [][]byte
	for k, v := range x.Metadata {
		if enc, ok := metaIndexable(k, v); ok {
			metas = append(metas, metaPrefix(k, enc))
		}
	}
	slices.SortFunc(metas, bytes.Compare) // the attributes row is the same for the same thread
	busy := x.Active != "" || len(x.Queue) > 0
	return rowsFromAttr(id, encodeThreadAttr(timeKey(x.CreatedAt), timeKey(x.UpdatedAt), busy, x.Status, metas))
}

// encodeThreadAttr is a thread's attributes row: created ‖ updated ‖
// busy (1 byte) ‖ uvarint len ‖ status ‖ (uvarint len ‖ metadata posting
// prefix)*. Everything its index rows are made of, so a write replaces
// them without decoding the old record (whose values grow with the
// conversation).
func encodeThreadAttr(created, updated []byte, busy bool, status string, metas [][]byte) []byte {
	b := cat(created, updated)
	if busy {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = append(binary.AppendUvarint(b, uint64(len(status))), status...)
	for _, m := range metas {
		b = append(binary.AppendUvarint(b, uint64(len(m))), m...)
	}
	return b
}

// threadAttr is a decoded attributes row.
type threadAttr struct {
	created, updated []byte
	busy             bool
	status           string
	metas            [][]byte
}

func decodeThreadAttr(v []byte) (threadAttr, bool) {
	if len(v) < 17 {
		return threadAttr{}, false
	}
	a := threadAttr{created: v[:8], updated: v[8:16], busy: v[16] == 1}
	rest := v[17:]
	next := func() ([]byte, bool) {
		n, k := binary.Uvarint(rest)
		if k <= 0 || uint64(len(rest)-k) < n {
			return nil, false
		}
		b := rest[k : k+int(n)]
		rest = rest[k+int(n):]
		return b, true
	}
	st, ok := next()
	if !ok {
		return threadAttr{}, false
	}
	a.status = string(st)
	for len(rest) > 0 {
		m, ok := next()
		if !ok {
			return threadAttr{}, false
		}
		a.metas = append(a.metas, m)
	}
	return a, true
}

// rowsFromAttr are the index rows of thread id whose attributes row is v.
func rowsFromAttr(id, v []byte) []idxRow {
	a, ok := decodeThreadAttr(v)
	if !ok {
		return nil
	}
	doc := cat(a.created, id)
	rows := []idxRow{
		{bThreadsCreated, doc, nil},
		{bThreadsUpdated, cat(a.updated, id), nil},
		{bThreadsStatus, cat([]byte(a.status), []byte{0}, doc), nil},
		{bThreadsAttr, id, v},
	}
	if a.busy {
		rows = append(rows, idxRow{bThreadsBusy, id, nil})
	}
	for _, m := range a.metas {
		rows = append(rows, idxRow{bThreadsMeta, cat(m, doc), nil})
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

// storedThreadRows are the index rows of thread id as stored, read from
// its attributes row; raw, its record (nil when there is none), is
// decoded only when that row is missing. A record that does not decode
// and has no attributes row has no index rows (the migration skipped
// it), so it can still be replaced or deleted.
func storedThreadRows(tx *bolt.Tx, id string, raw []byte) []idxRow {
	if raw == nil {
		return nil
	}
	if v := tx.Bucket([]byte(bThreadsAttr)).Get([]byte(id)); v != nil {
		if rows := rowsFromAttr([]byte(id), v); rows != nil {
			return rows
		}
	}
	if x, err := oldIndexed(raw); err == nil {
		return threadIndexRows(x)
	}
	return nil
}

// reindexThread replaces a thread's index rows, before, by those of next
// (nil: it is deleted), writing only the rows that change.
func (t *boltTx) reindexThread(before []idxRow, next *threadIndexed) error {
	var after []idxRow
	if next != nil {
		after = threadIndexRows(next)
	}
	if err := writeIndexDiff(t.tx, before, after, t.touched); err != nil {
		return err
	}
	return applyCounts(t.tx, countDeltas(before, after), t.added)
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
		if r.bucket == bThreadsCreated || r.bucket == bThreadsUpdated {
			b.FillPercent = 0.9 // appended in time order
		}
		if err := b.Put(r.key, r.val); err != nil {
			return fmt.Errorf("put %s row: %w", r.bucket, err)
		}
		touched(r.bucket, r.key)
	}
	return nil
}

// buildThreadIndexes creates the index buckets and fills them from every
// thread record (the migration). A record that does not decode is left
// out: no search could list it before either (it failed them all).
func buildThreadIndexes(tx *bolt.Tx) error {
	for _, name := range threadIndexBuckets {
		if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
			return fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	counts := map[string]int64{}
	err := tx.Bucket([]byte(bThreads)).ForEach(func(k, v []byte) error {
		rows := storedThreadRows(tx, string(k), v)
		for c, d := range countDeltas(nil, rows) {
			counts[c] += d
		}
		return writeIndexDiff(tx, nil, rows, func(string, []byte) {})
	})
	if err != nil {
		return err
	}
	return applyCounts(tx, counts, func(string, []byte, int64) {})
}

// replayThreadRows applies a journal record's rows and re-derives the
// index rows of the threads whose records they write: a journal written
// before the indexes existed holds records without their index rows, and
// for one written since, deriving them again changes nothing.
func replayThreadRows(tx *bolt.Tx, rows []wbRow) error {
	threads := tx.Bucket([]byte(bThreads))
	old := map[string][]idxRow{}
	// A record journaled with its index rows carries its counters'
	// deltas too (rowAdd) when they change; one journaled before the
	// indexes has neither, and gets both derived here.
	counted := false
	for _, r := range rows {
		counted = counted || r.mode == rowAdd
	}
	for _, r := range rows {
		if r.bucket != bThreads {
			continue
		}
		if _, ok := old[string(r.key)]; !ok {
			old[string(r.key)] = storedThreadRows(tx, string(r.key), threads.Get(r.key))
		}
	}
	if err := applyRows(tx, rows); err != nil {
		return err
	}
	for id, before := range old {
		var after []idxRow
		if raw := threads.Get([]byte(id)); raw != nil {
			if x, err := oldIndexed(raw); err == nil {
				after = threadIndexRows(x)
			}
		}
		// The rows just applied may hold these index rows already; the
		// diff deletes and puts them again, to the same end.
		if err := writeIndexDiff(tx, before, after, func(string, []byte) {}); err != nil {
			return err
		}
		if !counted {
			if err := applyCounts(tx, countDeltas(before, after), func(string, []byte, int64) {}); err != nil {
				return err
			}
		}
	}
	return nil
}
