package agent

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The journal's records: the rows a journaled write puts or deletes, how
// they are encoded in the journal, and how they are applied to bbolt (by
// the flush, and by the replay after a crash). store_writebehind.go says
// how records are written and flushed.

// wbRow is one row a journaled write puts or deletes.
type wbRow struct {
	bucket   string
	mode     byte
	key, val []byte
}

const (
	rowPut        byte = 'p' // put
	rowPutNew     byte = 'n' // put unless the key exists (a task's regular writes)
	rowPutChanged byte = 'c' // put unless the same typed value is stored (channel values)
	rowDelete     byte = 'd' // delete
	rowAdd        byte = 'a' // add val (a big-endian int64) to the counter at key
)

// applyRows applies rows to tx as their writers meant them.
func applyRows(tx *bolt.Tx, rows []wbRow) error {
	for _, r := range rows {
		b := tx.Bucket([]byte(r.bucket))
		if b == nil {
			return fmt.Errorf("apply journaled row: no bucket %q", r.bucket)
		}
		if r.bucket == bLG {
			// A packed thread's rows go back to lg before one of them
			// changes (store_lgpack.go).
			if _, err := unpackThread(tx, lgThreadOf(r.key)); err != nil {
				return err
			}
		}
		switch r.bucket {
		case bLG, bThreads, bRuns, bThreadRuns, bThreadsCreated, bThreadsUpdated:
			// Keys are time-ordered (thread, run and checkpoint ids) and
			// grow at the end: leaves split full, not in halves, so fewer
			// pages hold the same rows and fewer are rewritten.
			b.FillPercent = 0.9
		}
		if r.mode == rowAdd {
			if len(r.val) != 8 {
				return fmt.Errorf("apply journaled row: a counter delta of %d bytes", len(r.val))
			}
			if err := addCounter(b, r.key, int64(binary.BigEndian.Uint64(r.val))); err != nil {
				return err
			}
			continue
		}
		if err := applyRow(b, r); err != nil {
			return err
		}
	}
	return nil
}

// rowTarget is where a row is applied: a bucket, or a thread's checkpoint
// rows gathered to be packed (packing).
type rowTarget interface {
	Get(k []byte) []byte
	Put(k, v []byte) error
	Delete(k []byte) error
}

// applyRow applies one row (not a counter's delta) as its writer meant it.
func applyRow(b rowTarget, r wbRow) error {
	switch r.mode {
	case rowDelete:
		return b.Delete(r.key)
	case rowPutNew:
		if b.Get(r.key) != nil {
			return nil
		}
	case rowPutChanged:
		// A value sent again unchanged (a saver sending every
		// channel, a retried put) is not rewritten: its row, and the
		// run it names for rollbacks, stay. A different value under
		// the same version replaces it: JavaScript savers number
		// versions 1, 2, 3…, so a fork can reuse one.
		if old := b.Get(r.key); old != nil {
			prev, err1 := decodeBlob(old)
			next, err2 := decodeBlob(r.val)
			if err1 == nil && err2 == nil && prev.T == next.T && bytes.Equal(prev.B, next.B) {
				return nil
			}
		}
	}
	return b.Put(r.key, r.val)
}

// wbOp is one journal record: rows of one thread.
type wbOp struct {
	seq    uint64
	thread string
	rows   []wbRow
}

const wbOpVersion = 2

func (op *wbOp) encode() []byte {
	n := 24 + len(op.thread)
	for _, r := range op.rows {
		n += 16 + len(r.bucket) + len(r.key) + len(r.val)
	}
	b := make([]byte, 0, n)
	b = append(b, wbOpVersion)
	b = binary.AppendUvarint(b, op.seq)
	b = binary.AppendUvarint(b, uint64(len(op.thread)))
	b = append(b, op.thread...)
	b = binary.AppendUvarint(b, uint64(len(op.rows)))
	for _, r := range op.rows {
		b = binary.AppendUvarint(b, uint64(len(r.bucket)))
		b = append(b, r.bucket...)
		b = append(b, r.mode)
		b = binary.AppendUvarint(b, uint64(len(r.key)))
		b = append(b, r.key...)
		b = binary.AppendUvarint(b, uint64(len(r.val)))
		b = append(b, r.val...)
	}
	return b
}

var errBadOp = errors.New("malformed journal record")

func decodeOp(b []byte) (*wbOp, error) {
	if len(b) == 0 || b[0] != wbOpVersion {
		return nil, errBadOp
	}
	b = b[1:]
	uv := func() (uint64, error) {
		n, k := binary.Uvarint(b)
		if k <= 0 {
			return 0, errBadOp
		}
		b = b[k:]
		return n, nil
	}
	bytesOf := func() ([]byte, error) {
		n, err := uv()
		if err != nil || n > uint64(len(b)) {
			return nil, errBadOp
		}
		v := b[:n:n]
		b = b[n:]
		return v, nil
	}
	seq, err := uv()
	if err != nil {
		return nil, err
	}
	thread, err := bytesOf()
	if err != nil {
		return nil, err
	}
	count, err := uv()
	if err != nil || count > uint64(len(b)) {
		return nil, errBadOp
	}
	op := &wbOp{seq: seq, thread: string(thread), rows: make([]wbRow, 0, count)}
	for i := uint64(0); i < count; i++ {
		bucket, err := bytesOf()
		if err != nil || len(b) == 0 {
			return nil, errBadOp
		}
		mode := b[0]
		b = b[1:]
		switch mode {
		case rowPut, rowPutNew, rowPutChanged, rowDelete, rowAdd:
		default:
			return nil, errBadOp
		}
		key, err := bytesOf()
		if err != nil {
			return nil, err
		}
		val, err := bytesOf()
		if err != nil {
			return nil, err
		}
		op.rows = append(op.rows, wbRow{bucket: string(bucket), mode: mode, key: key, val: val})
	}
	if len(b) != 0 {
		return nil, errBadOp
	}
	return op, nil
}

// coalesce returns rows with the effect of applying rows in order, in
// fewer rows: of a key's puts and deletes only the last is kept, and a
// counter's deltas are summed into one (none when they cancel, which
// addCounter would leave as it was). The flush applies every record of
// the last flushEvery at once, under bbolt's writer lock that a run's
// creation waits for; about half its rows are a thread's or a run's row
// and index entries written again later in the same run, and a third of
// the rest are counter deltas on a handful of keys.
//
// Rows of different keys commute, except checkpoint rows: one of them
// unpacks its thread's packed rows (applyRows), so lg rows are all kept,
// in their order. A key written in other modes too (put unless new or
// unchanged: its result depends on what is stored) keeps all its rows.
func coalesce(rows []wbRow) []wbRow {
	type keyRows struct {
		last  int
		mixed bool
		adds  bool
		sum   int64
	}
	keys := make(map[string]*keyRows, len(rows))
	name := func(r wbRow) string { return r.bucket + "\x00" + string(r.key) }
	for i, r := range rows {
		if r.bucket == bLG {
			continue
		}
		k := name(r)
		kr := keys[k]
		if kr == nil {
			kr = &keyRows{adds: r.mode == rowAdd}
			keys[k] = kr
		}
		kr.last = i
		switch {
		case r.mode == rowAdd && kr.adds && len(r.val) == 8:
			kr.sum += int64(binary.BigEndian.Uint64(r.val))
		case (r.mode == rowPut || r.mode == rowDelete) && !kr.adds:
		default:
			// Applied as written, so a malformed delta still fails there.
			kr.mixed = true
		}
	}
	out := make([]wbRow, 0, len(keys))
	for i, r := range rows {
		if r.bucket == bLG {
			out = append(out, r)
			continue
		}
		kr := keys[name(r)]
		switch {
		case kr.mixed:
			out = append(out, r)
		case i != kr.last:
		case kr.adds:
			if kr.sum != 0 {
				out = append(out, wbRow{bucket: r.bucket, mode: rowAdd, key: r.key,
					val: binary.BigEndian.AppendUint64(nil, uint64(kr.sum))})
			}
		default:
			out = append(out, r)
		}
	}
	return out
}
