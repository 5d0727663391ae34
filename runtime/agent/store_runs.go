package agent

import (
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"slipway/storage"
)

const (
	bRuns       = "runs"
	bThreadRuns = "idx_thread_runs"
)

// runReads are a unit of work's reads of runs.
type runReads interface {
	// GetRun returns the run's record, or an error wrapping ErrNotFound.
	GetRun(id string) (*runRecord, error)
	// RunNotBefore returns when a queued run may start (nil: at once)
	// without decoding the rest of its record; ErrNotFound when missing.
	RunNotBefore(id string) (*time.Time, error)
	// ThreadRunIDs returns the ids of the thread's runs in the order they
	// were indexed (ids are UUIDv7: creation order).
	ThreadRunIDs(thread string) ([]string, error)
	// EachThreadRunNewest calls fn with the thread's runs, newest first
	// (index order backwards: ids are UUIDv7), until fn returns false;
	// what fn does not ask for is not read.
	EachThreadRunNewest(thread string, fn func(*runRecord) bool) error
}

// runWrites are a unit of work's writes of runs. A run belongs to one
// thread: its record and its entry in the thread's index are written and
// deleted together.
type runWrites interface {
	// PutRun creates or replaces the run's record (an eventRunChanged
	// once committed).
	PutRun(r *runRecord) error
	// IndexRun lists run under thread (ThreadRunIDs): the run's
	// admission, an eventRunQueued once committed.
	IndexRun(thread, run string) error
	// DeleteRun deletes the run's record and its index entry (an
	// eventRunChanged without a status).
	DeleteRun(thread, run string) error
	// DeleteThreadRuns deletes every run of the thread and the index.
	DeleteThreadRuns(thread string) error
}

func (t *boltTx) GetRun(id string) (*runRecord, error) {
	runDecodes.Add(1)
	var r runRecord
	if err := getJSON(t.read(bRuns), id, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

func (t *boltTx) RunNotBefore(id string) (*time.Time, error) {
	var r struct {
		NotBefore *time.Time `json:"not_before"`
	}
	if err := getJSON(t.read(bRuns), id, &r); err != nil {
		return nil, err
	}
	return r.NotBefore, nil
}

func (t *boltTx) ThreadRunIDs(thread string) ([]string, error) {
	tid, err := uuid.Parse(thread)
	if err != nil {
		return nil, fmt.Errorf("%w: thread %s", ErrNotFound, thread)
	}
	var ids []string
	t.read(bThreadRuns).scan(tid[:], func(k, _ []byte) bool {
		ids = append(ids, uuid.UUID(k[16:]).String())
		return true
	})
	return ids, nil
}

// runDecodes counts the run records the store decoded: tests assert that
// a page of a thread's runs reads the page, not the thread.
var runDecodes atomic.Int64

func (t *boltTx) EachThreadRunNewest(thread string, fn func(*runRecord) bool) error {
	tid, err := uuid.Parse(thread)
	if err != nil {
		return fmt.Errorf("%w: thread %s", ErrNotFound, thread)
	}
	runs := t.read(bRuns)
	t.read(bThreadRuns).scanBack(tid[:], nil, func(k, _ []byte) bool {
		if len(k) != 32 {
			return true
		}
		var r runRecord
		runDecodes.Add(1)
		if err := getJSON(runs, uuid.UUID(k[16:]).String(), &r); err != nil {
			return true // indexed, record gone: as ListRuns always skipped it
		}
		return fn(&r)
	})
	return nil
}

func (t *boltTx) PutRun(r *runRecord) error {
	if err := putJSON(t.tx.Bucket([]byte(bRuns)), r.RunID, r); err != nil {
		return fmt.Errorf("put run: %w", err)
	}
	t.touched(bRuns, []byte(r.RunID))
	t.note(storeEvent{Kind: eventRunChanged, Thread: r.ThreadID, Run: r.RunID, Status: r.Status})
	return nil
}

func (t *boltTx) IndexRun(thread, run string) error {
	idx := t.tx.Bucket([]byte(bThreadRuns))
	idx.FillPercent = 0.9
	k := idxKey(thread, run)
	if err := idx.Put(k, nil); err != nil {
		return fmt.Errorf("index run: %w", err)
	}
	t.touched(bThreadRuns, k)
	t.note(storeEvent{Kind: eventRunQueued, Thread: thread, Run: run})
	return nil
}

func (t *boltTx) DeleteRun(thread, run string) error {
	k := idxKey(thread, run)
	if err := t.tx.Bucket([]byte(bThreadRuns)).Delete(k); err != nil {
		return err
	}
	t.touched(bThreadRuns, k)
	if err := t.tx.Bucket([]byte(bRuns)).Delete([]byte(run)); err != nil {
		return err
	}
	t.touched(bRuns, []byte(run))
	t.note(storeEvent{Kind: eventRunChanged, Thread: thread, Run: run})
	return nil
}

func (t *boltTx) DeleteThreadRuns(thread string) error {
	tid := uuid.MustParse(thread)
	bk := t.tx.Bucket([]byte(bThreadRuns))
	var keys [][]byte
	c := bk.Cursor()
	for k, _ := c.Seek(tid[:]); k != nil && strings.HasPrefix(string(k), string(tid[:])); k, _ = c.Next() {
		keys = append(keys, storage.Copy(k))
	}
	for _, k := range keys {
		run := uuid.UUID(k[16:]).String()
		if err := t.tx.Bucket([]byte(bRuns)).Delete([]byte(run)); err != nil {
			return err
		}
		t.touched(bRuns, []byte(run))
		t.note(storeEvent{Kind: eventRunChanged, Thread: thread, Run: run})
		if err := bk.Delete(k); err != nil {
			return err
		}
		t.touched(bThreadRuns, k)
	}
	return nil
}
