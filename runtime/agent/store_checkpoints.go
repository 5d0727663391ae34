package agent

import (
	"bytes"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/google/uuid"

	"slipway/storage"
)

const bCheckpoints = "checkpoints"

// checkpointReads are a unit of work's reads of the checkpoints the
// engine keeps itself (built-in graphs' threads), numbered per thread by
// the thread record's Seq. Language-host graphs' checkpoints are the lg
// rows (hostcheckpoints.go).
type checkpointReads interface {
	// GetCheckpoint returns the thread's checkpoint seq, or an error
	// wrapping ErrNotFound.
	GetCheckpoint(thread string, seq uint64) (*Checkpoint, error)
	// CheckpointRefAt returns checkpoint seq's reference only, without
	// decoding its values.
	CheckpointRefAt(thread string, seq uint64) (*CheckpointRef, error)
	// ForEachCheckpoint calls fn for the thread's checkpoints in
	// sequence order until fn returns an error, which it returns.
	ForEachCheckpoint(thread string, fn func(seq uint64, cp *Checkpoint) error) error
	// CheckpointsNewestFirst calls fn for the thread's checkpoints from
	// the newest back while fn returns true and no error.
	CheckpointsNewestFirst(thread string, fn func(cp *Checkpoint) (bool, error)) error
	// CheckpointsBefore is CheckpointsNewestFirst from the checkpoint
	// just older than the one whose id is before, found by a seek rather
	// than by reading the newer ones; none when the thread has no such
	// checkpoint.
	CheckpointsBefore(thread, before string, fn func(cp *Checkpoint) (bool, error)) error
	// CheckpointByID returns the thread's checkpoint whose id is id, found
	// by a seek, or an error wrapping ErrNotFound.
	CheckpointByID(thread, id string) (*Checkpoint, error)
}

// checkpointWrites are a unit of work's writes of those checkpoints.
type checkpointWrites interface {
	// PutCheckpoint stores cp as the thread's checkpoint seq.
	PutCheckpoint(thread string, seq uint64, cp *Checkpoint) error
	// DeleteCheckpointsBefore deletes the thread's checkpoints numbered
	// below seq.
	DeleteCheckpointsBefore(thread string, seq uint64) error
	// DeleteThreadCheckpoints deletes all of the thread's checkpoints.
	DeleteThreadCheckpoints(thread string) error
}

func cpKey(thread string, seq uint64) []byte {
	t := uuid.MustParse(thread)
	return append(t[:], storage.U64(seq)...)
}

// checkpointRowsRead counts the checkpoint rows the store decoded (a
// test hook: history must read only the checkpoints it returns).
var checkpointRowsRead atomic.Int64

func (t *boltTx) GetCheckpoint(thread string, seq uint64) (*Checkpoint, error) {
	var cp Checkpoint
	checkpointRowsRead.Add(1)
	if err := getJSON(t.tx.Bucket([]byte(bCheckpoints)), string(cpKey(thread, seq)), &cp); err != nil {
		return nil, err
	}
	return &cp, nil
}

func (t *boltTx) CheckpointRefAt(thread string, seq uint64) (*CheckpointRef, error) {
	var prev struct {
		Checkpoint CheckpointRef `json:"checkpoint"`
	}
	checkpointRowsRead.Add(1)
	if err := getJSON(t.tx.Bucket([]byte(bCheckpoints)), string(cpKey(thread, seq)), &prev); err != nil {
		return nil, err
	}
	return &prev.Checkpoint, nil
}

func (t *boltTx) ForEachCheckpoint(thread string, fn func(uint64, *Checkpoint) error) error {
	tid := uuid.MustParse(thread)
	c := t.tx.Bucket([]byte(bCheckpoints)).Cursor()
	for k, v := c.Seek(tid[:]); k != nil && strings.HasPrefix(string(k), string(tid[:])); k, v = c.Next() {
		var cp Checkpoint
		checkpointRowsRead.Add(1)
		if err := unmarshalStored(v, &cp); err != nil {
			return err
		}
		if err := fn(storage.U64ToInt(k[16:]), &cp); err != nil {
			return err
		}
	}
	return nil
}

func (t *boltTx) CheckpointsNewestFirst(thread string, fn func(*Checkpoint) (bool, error)) error {
	return t.checkpointsBelow(thread, ^uint64(0), fn)
}

// checkpointsBelow calls fn for the thread's checkpoints numbered below
// seq, newest first, while fn returns true and no error.
func (t *boltTx) checkpointsBelow(thread string, seq uint64, fn func(*Checkpoint) (bool, error)) error {
	tid := uuid.MustParse(thread)
	c := t.tx.Bucket([]byte(bCheckpoints)).Cursor()
	k, v := c.Seek(cpKey(thread, seq))
	if k == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	for ; k != nil && bytes.HasPrefix(k, tid[:]); k, v = c.Prev() {
		if len(k) != 24 {
			continue
		}
		var cp Checkpoint
		checkpointRowsRead.Add(1)
		if err := unmarshalStored(v, &cp); err != nil {
			return err
		}
		more, err := fn(&cp)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

func (t *boltTx) CheckpointsBefore(thread, before string, fn func(*Checkpoint) (bool, error)) error {
	seq, ok, err := t.checkpointSeq(thread, before)
	if err != nil || !ok {
		return err
	}
	return t.checkpointsBelow(thread, seq, fn)
}

func (t *boltTx) CheckpointByID(thread, id string) (*Checkpoint, error) {
	seq, ok, err := t.checkpointSeq(thread, id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: checkpoint %s", ErrNotFound, id)
	}
	return t.GetCheckpoint(thread, seq)
}

// checkpointSeq finds the number of the thread's checkpoint id. Ids are
// UUIDv7, so they grow with the numbers: a binary search over the
// thread's keys, reading only the probed rows' references, finds it in
// O(log n) reads. Should the ids not be ordered (a clock stepped back
// between two checkpoints), the search can miss, and a scan of the
// references, newest first, decides.
func (t *boltTx) checkpointSeq(thread, id string) (uint64, bool, error) {
	tid := uuid.MustParse(thread)
	c := t.tx.Bucket([]byte(bCheckpoints)).Cursor()
	ref := func(v []byte) (string, error) {
		var r struct {
			Checkpoint CheckpointRef `json:"checkpoint"`
		}
		checkpointRowsRead.Add(1)
		if err := unmarshalStored(v, &r); err != nil {
			return "", err
		}
		return r.Checkpoint.CheckpointID, nil
	}
	first, _ := c.Seek(tid[:])
	if first == nil || !bytes.HasPrefix(first, tid[:]) {
		return 0, false, nil
	}
	last, _ := c.Seek(cpKey(thread, ^uint64(0)))
	if last == nil {
		last, _ = c.Last()
	} else {
		last, _ = c.Prev()
	}
	lo, hi := storage.U64ToInt(first[16:]), storage.U64ToInt(last[16:])
	for len(first) == 24 && len(last) == 24 && lo <= hi {
		mid := lo + (hi-lo)/2
		k, v := c.Seek(cpKey(thread, mid))
		if k == nil || !bytes.HasPrefix(k, tid[:]) || len(k) != 24 || storage.U64ToInt(k[16:]) > hi {
			if mid == 0 {
				break
			}
			hi = mid - 1
			continue
		}
		got, err := ref(v)
		if err != nil {
			return 0, false, err
		}
		s := storage.U64ToInt(k[16:])
		switch {
		case got == id:
			return s, true, nil
		case got < id:
			lo = s + 1
		default:
			if mid == 0 {
				lo = hi + 1
				break
			}
			hi = mid - 1
		}
	}
	k, v := c.Seek(cpKey(thread, ^uint64(0)))
	if k == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	for ; k != nil && bytes.HasPrefix(k, tid[:]); k, v = c.Prev() {
		got, err := ref(v)
		if err != nil {
			return 0, false, err
		}
		if got == id {
			return storage.U64ToInt(k[16:]), true, nil
		}
	}
	return 0, false, nil
}

func (t *boltTx) PutCheckpoint(thread string, seq uint64, cp *Checkpoint) error {
	if err := t.unconfined(); err != nil {
		return err
	}
	if err := putJSON(t.tx.Bucket([]byte(bCheckpoints)), string(cpKey(thread, seq)), cp); err != nil {
		return fmt.Errorf("put checkpoint: %w", err)
	}
	return nil
}

func (t *boltTx) DeleteCheckpointsBefore(thread string, seq uint64) error {
	if err := t.unconfined(); err != nil {
		return err
	}
	tid := uuid.MustParse(thread)
	cps := t.tx.Bucket([]byte(bCheckpoints))
	var old [][]byte
	c := cps.Cursor()
	for k, _ := c.Seek(tid[:]); k != nil && bytes.HasPrefix(k, tid[:]); k, _ = c.Next() {
		if len(k) == 24 && storage.U64ToInt(k[16:]) < seq {
			old = append(old, storage.Copy(k))
		}
	}
	for _, k := range old {
		if err := cps.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

func (t *boltTx) DeleteThreadCheckpoints(thread string) error {
	if err := t.unconfined(); err != nil {
		return err
	}
	tid := uuid.MustParse(thread)
	bk := t.tx.Bucket([]byte(bCheckpoints))
	var keys [][]byte
	c := bk.Cursor()
	for k, _ := c.Seek(tid[:]); k != nil && strings.HasPrefix(string(k), string(tid[:])); k, _ = c.Next() {
		keys = append(keys, storage.Copy(k))
	}
	for _, k := range keys {
		if err := bk.Delete(k); err != nil {
			return err
		}
	}
	return nil
}
