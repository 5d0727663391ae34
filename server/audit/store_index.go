package audit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

// The operation index (idxOp) is not covered by the chain's MACs: it is
// derived data, so Verify checks it against the chain instead. Each record
// of the chain must be indexed exactly once, under its own operation, and
// every index entry must name a record of the chain with that operation.
// An entry deleted would hide its event from queries filtered by
// operation; one added or moved would show an event under an operation it
// is not (Run drops such hits too, see store_query.go).

// indexKey is the operation index key of record seq of org.
func indexKey(org uuid.UUID, op string, seq uint64) []byte {
	return storage.Key(org, op, []byte{0}, storage.U64(seq))
}

// verifyIndex checks org's operation index against its chain, which has
// verified, and returns the first disagreement: walking the chain in seq
// order, a record whose entry is missing; then, when the index holds more
// entries than the chain has records, the first entry (in key order) that
// names no record or a record of another operation.
func verifyIndex(tx *bolt.Tx, org uuid.UUID) *Break {
	idx := tx.Bucket([]byte(idxOp))
	fail := func(seq uint64, format string, args ...any) *Break {
		return &Break{Org: org.String(), Seq: seq, Reason: "operation index: " + fmt.Sprintf(format, args...)}
	}
	records := 0
	var brk *Break
	_ = eachOp(tx, org, func(seq uint64, op string, err error) error {
		switch {
		case err != nil:
			brk = fail(seq, "record %d is unreadable: %v", seq, err)
		case idx.Get(indexKey(org, op, seq)) == nil:
			brk = fail(seq, "record %d (%s) is missing from the index: queries filtered by operation do not return it", seq, op)
		default:
			records++
			return nil
		}
		return errStopWalk
	})
	if brk != nil {
		return brk
	}
	// Every record has its own key; an index of the same size holds
	// nothing else.
	entries := 0
	ic := idx.Cursor()
	for k, _ := ic.Seek(org[:]); k != nil && bytes.HasPrefix(k, org[:]); k, _ = ic.Next() {
		entries++
	}
	if entries == records {
		return nil
	}
	for k, _ := ic.Seek(org[:]); k != nil && bytes.HasPrefix(k, org[:]); k, _ = ic.Next() {
		op, seq, ok := parseIndexKey(k)
		if !ok {
			return fail(0, "an entry (%x) is malformed", k[16:])
		}
		v := tx.Bucket([]byte(bucketEvents)).Get(storage.Key(org, storage.U64(seq)))
		if v == nil || seq == headSeq {
			return fail(seq, "an entry under %s names record %d, which the chain does not hold", op, seq)
		}
		rec, err := decodeRecord(v)
		if err != nil {
			return fail(seq, "record %d is unreadable: %v", seq, err)
		}
		b, err := rec.body()
		if err != nil {
			return fail(seq, "record %d is unreadable: %v", seq, err)
		}
		if b.Op != op {
			return fail(seq, "an entry under %s names record %d, which is %s: queries filtered by %s would show it", op, seq, b.Op, op)
		}
	}
	return fail(0, "it holds %d entries for %d records", entries, records)
}

// parseIndexKey splits an operation index key (org id ‖ operation ‖ 0x00 ‖
// uint64 seq).
func parseIndexKey(k []byte) (op string, seq uint64, ok bool) {
	if len(k) < 16+1+8 || k[len(k)-9] != 0 {
		return "", 0, false
	}
	op = string(k[16 : len(k)-9])
	return op, binary.BigEndian.Uint64(k[len(k)-8:]), Known(op)
}

// pruneIndex deletes org's index entries of records up to seq, under every
// operation: by sequence rather than by what each pruned record says, so
// that entries an edit of the index or of a record left behind go with
// the records they named.
func pruneIndex(tx *bolt.Tx, org uuid.UUID, seq uint64) error {
	idx := tx.Bucket([]byte(idxOp))
	var doomed [][]byte
	c := idx.Cursor()
	for _, op := range Operations {
		prefix := storage.Key(org, op, []byte{0})
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(k) == len(prefix)+8 &&
			binary.BigEndian.Uint64(k[len(prefix):]) <= seq; k, _ = c.Next() {
			doomed = append(doomed, storage.Copy(k))
		}
	}
	for _, k := range doomed {
		if err := idx.Delete(k); err != nil {
			return fmt.Errorf("audit index: %w", err)
		}
	}
	return nil
}

// Reindex rebuilds org's operation index from its chain, in tx: every
// entry of org goes, then each record is indexed under its operation. It
// returns the number of records indexed. It repairs what Verify reports
// of the index; a chain that does not verify is indexed as it stands, and
// its break is still reported. An organization without a chain is left
// alone: the index entries of a chain deleted whole are what names it.
func (l *Log) Reindex(tx *bolt.Tx, org uuid.UUID) (int, error) {
	if _, found, err := getHead(tx, org); err != nil || !found {
		return 0, err
	}
	idx := tx.Bucket([]byte(idxOp))
	var doomed [][]byte
	c := idx.Cursor()
	for k, _ := c.Seek(org[:]); k != nil && bytes.HasPrefix(k, org[:]); k, _ = c.Next() {
		doomed = append(doomed, storage.Copy(k))
	}
	for _, k := range doomed {
		if err := idx.Delete(k); err != nil {
			return 0, fmt.Errorf("audit index: %w", err)
		}
	}
	n := 0
	err := eachOp(tx, org, func(seq uint64, op string, err error) error {
		if err != nil {
			return fmt.Errorf("audit record %d of %s: %w", seq, org, err)
		}
		if err := idx.Put(indexKey(org, op, seq), nil); err != nil {
			return fmt.Errorf("audit index: %w", err)
		}
		n++
		return nil
	})
	return n, err
}

// errStopWalk ends an eachOp walk early; eachOp returns it as is.
var errStopWalk = errors.New("stop")

// eachOp calls fn with every record of org's chain in seq order and its
// operation, or the error that made the record unreadable; it stops at
// fn's first error and returns it.
func eachOp(tx *bolt.Tx, org uuid.UUID, fn func(seq uint64, op string, err error) error) error {
	c := tx.Bucket([]byte(bucketEvents)).Cursor()
	for k, v := c.Seek(org[:]); k != nil && bytes.HasPrefix(k, org[:]); k, v = c.Next() {
		seq := binary.BigEndian.Uint64(k[16:])
		if seq == headSeq {
			return nil
		}
		op := ""
		rec, err := decodeRecord(v)
		if err == nil {
			var b body
			if b, err = rec.body(); err == nil {
				op = b.Op
			}
		}
		if err := fn(seq, op, err); err != nil {
			return err
		}
	}
	return nil
}
