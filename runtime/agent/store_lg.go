package agent

import (
	"bytes"
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Language-host graphs' checkpoint rows (key layout in hostcheckpoints.go)
// in one bucket, so that a thread's rows share pages.
const (
	// Before schema 5, three buckets (see mergeLGBuckets).
	bLGCheckpoints = "lg_checkpoints"
	bLGBlobs       = "lg_blobs"
	bLGWrites      = "lg_writes"

	bLG = "lg"
)

// cpRow is one checkpoint row a host's checkpointer writes: mode is
// rowPut (put), rowPutNew (put unless the key exists: a task's regular
// writes are saved once) or rowPutChanged (put unless the same typed
// value is stored: channel values sent again unchanged).
type cpRow struct {
	mode     byte
	key, val []byte
}

// checkpointRows reads checkpoint rows in key order.
type checkpointRows interface {
	// get returns the row's value, nil when there is none.
	get(k []byte) []byte
	// scan calls fn for every row whose key has prefix, in key order,
	// until fn returns false.
	scan(prefix []byte, fn func(k, v []byte) bool)
	// last returns the row with the greatest key that has prefix, or nils.
	last(prefix []byte) ([]byte, []byte)
	// scanBack calls fn for every row whose key has prefix and is below
	// below (nil: every such row), in reverse key order, until fn
	// returns false: a page of the newest rows seeks and stops.
	scanBack(prefix, below []byte, fn func(k, v []byte) bool)
}

// checkpointRowWrites are a unit of work's reads and writes of checkpoint
// rows (a rollback, a thread's copy or deletion, a TTL prune): they are
// not fenced, the unit of work decides. Keys and values passed to fn are
// valid only during the call.
type checkpointRowWrites interface {
	ScanCheckpointRows(prefix []byte, fn func(k, v []byte) bool) error
	PutCheckpointRow(k, v []byte) error
	DeleteCheckpointRow(k []byte) error
}

// checkpointRowStore is the Store's part for the host's checkpointer,
// whose writes come outside the engine's units of work and are fenced:
// only the thread's running run may write its rows (a write by any other
// run fails with ErrFenced), and a write outside any run ("" run) only
// while the thread has no run.
type checkpointRowStore interface {
	// PutCheckpointRows writes rows of thread for run, atomically, if the
	// fence lets run write (fence in hostcheckpoints.go).
	PutCheckpointRows(ctx context.Context, thread, run string, rows []cpRow) error
	// ViewCheckpointRows reads checkpoint rows with every acknowledged
	// write of thread's ("" every thread's).
	ViewCheckpointRows(ctx context.Context, thread string, fn func(checkpointRows) error) error
	// OpenFence says run became thread's running run: until CloseFence
	// (or an UpdateThread with end) an implementation may take run's
	// writes by a faster path without checking the fence in a unit of
	// work (the bbolt store journals them). Whatever deletes the rows
	// of a thread, or ends its run, closes the fence first.
	OpenFence(thread, run string)
	CloseFence(thread string)
}

func (s *boltStore) PutCheckpointRows(ctx context.Context, thread, run string, rows []cpRow) error {
	wb := make([]wbRow, len(rows))
	for i, r := range rows {
		wb[i] = wbRow{bucket: bLG, mode: r.mode, key: r.key, val: r.val}
	}
	if done, err := s.pend.journalLG(thread, run, wb); done {
		return err
	}
	return s.Update(ctx, func(tx Tx) error {
		if err := fence(tx, thread, run); err != nil {
			return err
		}
		// Unpacked as a unit of work's write, so that Update packs the
		// thread again (update_state's rows, a write outside any run).
		if err := tx.(*boltTx).unpack([]byte(thread)); err != nil {
			return err
		}
		return applyRows(boltOf(tx), wb)
	})
}

func (s *boltStore) ViewCheckpointRows(_ context.Context, thread string, fn func(checkpointRows) error) error {
	return s.readAt(thread, func(tx *bolt.Tx, ops []*wbOp) error {
		r, err := reader(tx, thread, ops)
		if err != nil {
			return err
		}
		return fn(r)
	})
}

func (s *boltStore) OpenFence(thread, run string) { s.pend.own(thread, run) }
func (s *boltStore) CloseFence(thread string)     { s.pend.disown(thread) }

func (t *boltTx) ScanCheckpointRows(prefix []byte, fn func(k, v []byte) bool) error {
	// A journaled unit of work reads a thread without its pending
	// checkpoint rows (pendingWrites.overlay): it must not scan them.
	if err := t.unconfined(); err != nil {
		return err
	}
	thread := ""
	if bytes.IndexByte(prefix, 0) >= 0 {
		thread = string(lgThreadOf(prefix))
	}
	base, err := lgBase(t.tx, thread)
	if err != nil {
		return err
	}
	c := base.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if !fn(k, v) {
			break
		}
	}
	return nil
}

func (t *boltTx) PutCheckpointRow(k, v []byte) error {
	if err := t.unconfined(); err != nil {
		return err
	}
	if err := t.unpack(lgThreadOf(k)); err != nil {
		return err
	}
	if err := t.tx.Bucket([]byte(bLG)).Put(k, v); err != nil {
		return fmt.Errorf("put checkpoint row: %w", err)
	}
	return nil
}

func (t *boltTx) DeleteCheckpointRow(k []byte) error {
	if err := t.unconfined(); err != nil {
		return err
	}
	if err := t.unpack(lgThreadOf(k)); err != nil {
		return err
	}
	return t.tx.Bucket([]byte(bLG)).Delete(k)
}
