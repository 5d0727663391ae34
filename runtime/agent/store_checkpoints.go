package agent

import (
	"bytes"
	"fmt"
	"strings"

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

func (t *boltTx) GetCheckpoint(thread string, seq uint64) (*Checkpoint, error) {
	var cp Checkpoint
	if err := getJSON(t.tx.Bucket([]byte(bCheckpoints)), string(cpKey(thread, seq)), &cp); err != nil {
		return nil, err
	}
	return &cp, nil
}

func (t *boltTx) CheckpointRefAt(thread string, seq uint64) (*CheckpointRef, error) {
	var prev struct {
		Checkpoint CheckpointRef `json:"checkpoint"`
	}
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
	tid := uuid.MustParse(thread)
	c := t.tx.Bucket([]byte(bCheckpoints)).Cursor()
	k, v := c.Seek(append(tid[:], storage.U64(^uint64(0))...))
	if k == nil {
		k, v = c.Last()
	} else if !strings.HasPrefix(string(k), string(tid[:])) || len(k) == 24 {
		k, v = c.Prev()
	}
	for ; k != nil && strings.HasPrefix(string(k), string(tid[:])); k, v = c.Prev() {
		var cp Checkpoint
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
