package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"slipway/storage"
)

func (e *Engine) latestCheckpoint(tx ReadTx, t *threadRecord) (*Checkpoint, error) {
	if t.Seq == 0 {
		return nil, nil
	}
	return tx.GetCheckpoint(t.ThreadID, t.Seq)
}

// emptyState is the state of a thread without checkpoints.
func emptyState(id string) Checkpoint {
	return Checkpoint{Values: map[string]any{}, Next: []string{}, Tasks: []any{}, Metadata: map[string]any{},
		Interrupts: []any{}, Checkpoint: CheckpointRef{ThreadID: id}}
}

// StateQuery names a state of a thread: its latest, or a checkpoint, in
// the root graph or (checkpoint_ns) a subgraph; Subgraphs asks for the
// states of interrupted subgraphs inside the tasks. Namespaces and
// subgraphs exist only in language-host graphs' threads.
type StateQuery struct {
	CheckpointID string
	NS           string
	Subgraphs    bool
}

// GetState returns the thread's latest state, or the named checkpoint.
func (e *Engine) GetState(id, checkpointID string) (Checkpoint, error) {
	return e.GetStateQuery(id, StateQuery{CheckpointID: checkpointID})
}

// GetStateQuery returns the state q names.
func (e *Engine) GetStateQuery(id string, q StateQuery) (Checkpoint, error) {
	checkpointID := q.CheckpointID
	if g, err := e.hostThread(id); err != nil || g != nil {
		if err != nil {
			return Checkpoint{}, err
		}
		return e.hostState(g, id, q)
	}
	var out Checkpoint
	err := e.store.ViewThread(context.Background(), id, func(tx ReadTx) error {
		t, err := tx.GetThread(id)
		if err != nil {
			return fmt.Errorf("%w: thread %s", ErrNotFound, id)
		}
		if checkpointID != "" {
			cp, err := tx.CheckpointByID(id, checkpointID)
			if err == nil {
				out = *cp
				return nil
			}
			if !errors.Is(err, ErrNotFound) {
				return err
			}
			return fmt.Errorf("%w: checkpoint %s", ErrNotFound, checkpointID)
		}
		cp, err := e.latestCheckpoint(tx, t)
		if err != nil {
			return err
		}
		if cp == nil {
			out = emptyState(id)
			return nil
		}
		out = *cp
		return nil
	})
	return out, err
}

// HistoryQuery selects checkpoints of a thread, newest first: up to
// Limit, Before a checkpoint id, whose metadata matches Filter, in the
// namespace NS, only CheckpointID when given (NS and CheckpointID:
// language-host graphs' threads only).
type HistoryQuery struct {
	Limit        int
	Before       string
	Filter       map[string]any
	NS           string
	CheckpointID string
}

// History returns up to limit checkpoints, newest first, optionally before one.
func (e *Engine) History(id string, limit int, before string) ([]Checkpoint, error) {
	return e.HistoryQuery(id, HistoryQuery{Limit: limit, Before: before})
}

// HistoryQuery returns the checkpoints q selects.
func (e *Engine) HistoryQuery(id string, q HistoryQuery) ([]Checkpoint, error) {
	limit, before := q.Limit, q.Before
	if g, err := e.hostThread(id); err != nil || g != nil {
		if err != nil {
			return nil, err
		}
		return e.hostHistory(g, id, q)
	}
	var out []Checkpoint
	err := e.store.ViewThread(context.Background(), id, func(tx ReadTx) error {
		if !tx.ThreadExists(id) {
			return fmt.Errorf("%w: thread %s", ErrNotFound, id)
		}
		// Newest first by key order, stopping at limit matches: a page
		// reads the checkpoints it returns (and, with a filter, those it
		// skips), not the thread's whole history.
		out = []Checkpoint{}
		keep := func(cp *Checkpoint) (bool, error) {
			if matches(cp.Metadata, q.Filter) {
				out = append(out, *cp)
			}
			return limit <= 0 || len(out) < limit, nil
		}
		if before != "" {
			return tx.CheckpointsBefore(id, before, keep)
		}
		return tx.CheckpointsNewestFirst(id, keep)
	})
	if out == nil {
		out = []Checkpoint{}
	}
	return out, err
}

// writeCheckpoint appends a checkpoint to the thread (in the caller's tx).
func writeCheckpoint(tx Tx, t *threadRecord, values map[string]any, source string, step int, writes any, interrupts []any) (Checkpoint, error) {
	if interrupts == nil {
		interrupts = []any{}
	}
	var parent *CheckpointRef
	if t.Seq > 0 {
		// Only the parent's id is needed: decoding its values would
		// allocate the whole conversation again for every checkpoint.
		if ref, err := tx.CheckpointRefAt(t.ThreadID, t.Seq); err == nil {
			parent = ref
		}
	}
	t.Seq++
	cp := Checkpoint{Values: values, Next: []string{}, Tasks: []any{},
		Checkpoint: CheckpointRef{ThreadID: t.ThreadID, CheckpointID: storage.NewID().String()},
		Metadata:   map[string]any{"source": source, "step": step, "writes": writes},
		CreatedAt:  time.Now().UTC(), ParentConfig: parent, Interrupts: interrupts}
	t.Values = values
	return cp, tx.PutCheckpoint(t.ThreadID, t.Seq, &cp)
}

// UpdateState applies values to the thread's state as node asNode; refused
// while the thread has a pending or running run.
func (e *Engine) UpdateState(id string, values map[string]any, asNode string) (CheckpointRef, error) {
	return e.UpdateStateAt(id, values, asNode, CheckpointRef{})
}

// UpdateStateAt is UpdateState on a given checkpoint (at.CheckpointID, in
// namespace at.CheckpointNS): an update of an earlier checkpoint forks the
// thread's history from there. Only language-host graphs' threads have
// checkpoints to fork from.
func (e *Engine) UpdateStateAt(id string, values map[string]any, asNode string, at CheckpointRef) (CheckpointRef, error) {
	if g, err := e.hostThread(id); err != nil || g != nil {
		if err != nil {
			return CheckpointRef{}, err
		}
		return e.hostUpdateState(g, id, values, asNode, at)
	}
	if at.CheckpointID != "" || at.CheckpointNS != "" {
		return CheckpointRef{}, fmt.Errorf("%w: this thread's graph keeps one line of checkpoints; update_state on a checkpoint needs a LangGraph graph", ErrInvalid)
	}
	var ref CheckpointRef
	err := e.store.Update(context.Background(), func(tx Tx) error {
		t, err := tx.GetThread(id)
		if err != nil {
			return fmt.Errorf("%w: thread %s", ErrNotFound, id)
		}
		if t.busy() {
			return fmt.Errorf("%w: thread %s has a pending or running run", ErrConflict, id)
		}
		if g, _ := t.Metadata["graph_id"].(string); g == "" {
			// As the reference: a state update is applied as a graph's
			// node would, so the thread must have a graph.
			return fmt.Errorf("%w: Thread '%s' has no assigned graph ID. This usually occurs when no runs have been made on this particular thread. "+
				"This operation requires a graph ID. Please ensure a run has been made for the thread or manually update the thread metadata "+
				"(by setting the 'graph_id' field) before running this operation.", ErrBadRequest, id)
		}
		merged, err := ApplyUpdate(t.Values, values)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		if asNode == "" {
			asNode = "__update__"
		}
		cp, err := writeCheckpoint(tx, t, merged, "update", int(t.Seq), map[string]any{asNode: values}, nil)
		if err != nil {
			return err
		}
		ref = cp.Checkpoint
		t.UpdatedAt = e.now()
		return tx.PutThread(t)
	})
	return ref, err
}
