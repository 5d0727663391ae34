package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"slipway/storage"
)

// CreateThread creates a thread; with ifExists "do_nothing" an existing one is returned.
func (e *Engine) CreateThread(id string, metadata map[string]any, ifExists string) (Thread, error) {
	return e.createThread(id, metadata, ifExists, nil)
}

// createThread is CreateThread with the new thread's TTL (nil: the
// configured default), set in the transaction that creates it.
func (e *Engine) createThread(id string, metadata map[string]any, ifExists string, ttl *ThreadTTL) (Thread, error) {
	// An id made here is new: the unit only writes. (On PostgreSQL a
	// SERIALIZABLE read of a recent thread locks the index page that
	// every other recent thread is on, so the look for an existing one
	// made thread creation collide with the admissions and claims of the
	// other threads: BENCHMARKS.md, "Slipway on PostgreSQL against Aegra".)
	fresh := id == ""
	if fresh {
		id = storage.NewID().String() // time-ordered: new threads append to the B-trees
	}
	var out Thread
	create := func(tx Tx) error {
		if !fresh {
			if t, err := tx.GetThread(id); err == nil {
				if ifExists == "do_nothing" {
					out = t.view()
					return nil
				}
				return fmt.Errorf("%w: thread %s already exists", ErrConflict, id)
			}
		}
		now := e.now()
		t := threadRecord{Thread: Thread{ThreadID: id, CreatedAt: now, UpdatedAt: now, Metadata: metadata,
			Status: ThreadIdle, Values: map[string]any{}}}
		if err := e.initialTTL(tx, &t, ttl); err != nil {
			return err
		}
		out = t.view()
		return tx.PutThread(&t)
	}
	// A journaled write (store_writebehind.go) of the thread's record; with a
	// TTL the TTL index is written too, in a bbolt commit.
	err := e.store.UpdateThread(context.Background(), id, false, func(tx Tx) error {
		if ttl != nil || e.TTL.DefaultTTL > 0 {
			return errNotHot
		}
		return create(tx)
	})
	if errors.Is(err, errNotHot) {
		err = e.store.Update(context.Background(), create)
	}
	return out, err
}

// GetThread returns a thread.
func (e *Engine) GetThread(id string) (Thread, error) {
	var out Thread
	err := e.store.ViewThread(context.Background(), id, func(tx ReadTx) error {
		t, err := tx.GetThread(id)
		if err != nil {
			return fmt.Errorf("%w: thread %s", ErrNotFound, id)
		}
		out = t.view()
		return nil
	})
	return out, err
}

// PatchThread merges metadata into a thread's.
func (e *Engine) PatchThread(id string, metadata map[string]any) (Thread, error) {
	return e.patchThread(id, metadata, nil)
}

// patchThread is PatchThread that also sets the thread's TTL when ttl is
// not nil, counted from now (the patch is the thread's latest update).
func (e *Engine) patchThread(id string, metadata map[string]any, ttl *ThreadTTL) (Thread, error) {
	var out Thread
	err := e.store.Update(context.Background(), func(tx Tx) error {
		t, err := tx.GetThread(id)
		if err != nil {
			return fmt.Errorf("%w: thread %s", ErrNotFound, id)
		}
		if t.Metadata == nil {
			t.Metadata = map[string]any{}
		}
		for k, v := range metadata {
			t.Metadata[k] = v
		}
		t.UpdatedAt = e.now()
		if ttl != nil {
			if err := setTTL(tx, t, *ttl); err != nil {
				return err
			}
		}
		out = t.view()
		return tx.PutThread(t)
	})
	return out, err
}

// DeleteThread cancels the thread's runs and deletes it with its runs and checkpoints.
func (e *Engine) DeleteThread(id string) error {
	var active string
	// The running run's checkpoint writes from now on are fenced (and
	// refused once the thread is gone).
	e.store.CloseFence(id)
	err := e.store.Update(context.Background(), func(tx Tx) error {
		t, err := tx.GetThread(id)
		if err != nil {
			return fmt.Errorf("%w: thread %s", ErrNotFound, id)
		}
		active = t.Active
		if err := deleteCronsOf(tx, "", id); err != nil {
			return err
		}
		return deleteThreadData(tx, id)
	})
	if err == nil && active != "" {
		e.cancelLive(active, "rollback", causeCancel)
	}
	return err
}

func deleteThreadData(tx Tx, id string) error {
	if err := tx.DeleteThreadRuns(id); err != nil {
		return err
	}
	if err := tx.DeleteThreadCheckpoints(id); err != nil {
		return err
	}
	if err := deleteLG(tx, id, ""); err != nil {
		return err
	}
	return tx.DeleteThreadRecord(id)
}

// ThreadFilter selects threads.
type ThreadFilter struct {
	IDs      []string
	Metadata map[string]any
	Values   map[string]any
	Status   string
	Limit    int
	Offset   int
	SortBy   string
	Desc     bool
}

func matches(have, want map[string]any) bool {
	for k, v := range want {
		a, _ := json.Marshal(have[k])
		b, _ := json.Marshal(v)
		if string(a) != string(b) {
			return false
		}
	}
	return true
}

// SearchThreads lists threads matching f; count is the number before
// paging. It costs FindThreads plus CountThreads.
func (e *Engine) SearchThreads(f ThreadFilter) ([]Thread, int, error) {
	page, err := e.FindThreads(f)
	if err != nil {
		return nil, 0, err
	}
	n, err := e.CountThreads(f)
	return page, n, err
}

// FindThreads returns the page of threads f selects, in its order, read
// through the thread indexes (store_threadsearch.go).
func (e *Engine) FindThreads(f ThreadFilter) ([]Thread, error) {
	var out []Thread
	// View: a search reads committed state (journaled rows are flushed
	// first), index rows included.
	err := e.store.View(context.Background(), func(tx ReadTx) error {
		recs, err := tx.SearchThreads(f)
		out = make([]Thread, 0, len(recs))
		for _, r := range recs {
			out = append(out, r.view())
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CountThreads counts the threads f selects, from the indexes.
func (e *Engine) CountThreads(f ThreadFilter) (int, error) {
	var n int
	err := e.store.View(context.Background(), func(tx ReadTx) error {
		var err error
		n, err = tx.CountThreads(f)
		return err
	})
	return n, err
}

// CopyThread makes a new thread with the same metadata and checkpoints.
func (e *Engine) CopyThread(id string) (Thread, error) {
	var out Thread
	err := e.store.Update(context.Background(), func(tx Tx) error {
		t, err := tx.GetThread(id)
		if err != nil {
			return fmt.Errorf("%w: thread %s", ErrNotFound, id)
		}
		nt := threadRecord{Thread: t.Thread, Seq: t.Seq, Graph: t.Graph}
		nt.ThreadID = storage.NewID().String()
		nt.Status = ThreadIdle
		nt.CreatedAt, nt.UpdatedAt = e.now(), e.now()
		if err := e.defaultTTL(tx, &nt); err != nil {
			return err
		}
		err = tx.ForEachCheckpoint(id, func(seq uint64, cp *Checkpoint) error {
			cp.Checkpoint.ThreadID = nt.ThreadID
			return tx.PutCheckpoint(nt.ThreadID, seq, cp)
		})
		if err != nil {
			return err
		}
		if err := copyLG(tx, id, nt.ThreadID); err != nil {
			return err
		}
		out = nt.view()
		return tx.PutThread(&nt)
	})
	return out, err
}
