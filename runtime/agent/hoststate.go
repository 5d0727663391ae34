package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"slipway/runtime/agent/hosts"
)

// Thread state of host graphs: the host computes a thread's values, tasks
// and interrupts from the engine's checkpoint rows, so reading or
// updating it is a call to the host serving the thread's graph.

// hostThread returns the host graph holding a thread's state, or nil for
// a thread whose state the engine keeps itself.
func (e *Engine) hostThread(id string) (*HostGraph, error) {
	var graph string
	err := e.store.ViewThread(context.Background(), id, func(tx ReadTx) error {
		g, metadata, err := tx.ThreadGraph(id)
		if err != nil {
			return fmt.Errorf("%w: thread %s", ErrNotFound, id)
		}
		graph = g
		if gid, _ := metadata["graph_id"].(string); graph == "" && gid != "" {
			// A thread that never ran but names a host graph (created
			// with graph_id): its state is that graph's, as on the
			// reference servers.
			if _, ok := e.Graphs[gid].(*HostGraph); ok {
				graph = gid
			}
		}
		return nil
	})
	if err != nil || graph == "" {
		return nil, err
	}
	g, _ := e.Graphs[graph].(*HostGraph)
	if g == nil || g.host == nil {
		return nil, fmt.Errorf("graph %q of thread %s is not served by this agent", graph, id)
	}
	return g, nil
}

// hostCallTimeout bounds state reads and updates in the host.
const hostCallTimeout = 30 * time.Second

func (e *Engine) hostState(g *HostGraph, id string, q StateQuery) (Checkpoint, error) {
	ctx, cancel := context.WithTimeout(e.ctx, hostCallTimeout)
	defer cancel()
	cp, err := g.state(ctx, map[string]any{"graph_id": g.ID, "thread_id": id, "checkpoint_id": q.CheckpointID,
		"checkpoint_ns": q.NS, "subgraphs": q.Subgraphs, "config": e.hostThreadConfig(id)})
	if err != nil {
		var he *hosts.Error
		if q.NS != "" && errors.As(err, &he) && strings.Contains(he.Message, "not found") {
			return Checkpoint{}, fmt.Errorf("%w: %s", ErrNotFound, he.Message)
		}
		return Checkpoint{}, err
	}
	if q.CheckpointID != "" && cp.Checkpoint.CheckpointID != q.CheckpointID {
		return Checkpoint{}, fmt.Errorf("%w: checkpoint %s", ErrNotFound, q.CheckpointID)
	}
	return fillState(cp, id), nil
}

func fillState(cp Checkpoint, thread string) Checkpoint {
	if cp.Values == nil {
		cp.Values = map[string]any{}
	}
	if cp.Next == nil {
		cp.Next = []string{}
	}
	if cp.Tasks == nil {
		cp.Tasks = []any{}
	}
	if cp.Metadata == nil {
		cp.Metadata = map[string]any{}
	}
	if cp.Interrupts == nil {
		cp.Interrupts = []any{}
	}
	if cp.Checkpoint.ThreadID == "" {
		cp.Checkpoint.ThreadID = thread
	}
	return cp
}

func (e *Engine) hostHistory(g *HostGraph, id string, q HistoryQuery) ([]Checkpoint, error) {
	ctx, cancel := context.WithTimeout(e.ctx, hostCallTimeout)
	defer cancel()
	var out []Checkpoint
	var filter any
	if len(q.Filter) > 0 {
		filter = q.Filter
	}
	err := g.host.Call(ctx, "history", map[string]any{"graph_id": g.ID, "thread_id": id, "limit": q.Limit, "before": q.Before,
		"filter": filter, "checkpoint_ns": q.NS, "checkpoint_id": q.CheckpointID, "config": e.hostThreadConfig(id)}, &out)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i] = fillState(out[i], id)
	}
	if out == nil {
		out = []Checkpoint{}
	}
	return out, nil
}

// hostUpdateState applies an update as a node (update_state), refused
// while the thread has a pending or running run, and records the state
// the host computes after it on the thread.
func (e *Engine) hostUpdateState(g *HostGraph, id string, values map[string]any, asNode string, at CheckpointRef) (CheckpointRef, error) {
	busy := false
	err := e.store.ViewThread(context.Background(), id, func(tx ReadTx) error {
		t, err := tx.GetThread(id)
		if err != nil {
			return fmt.Errorf("%w: thread %s", ErrNotFound, id)
		}
		busy = t.busy()
		return nil
	})
	if err != nil {
		return CheckpointRef{}, err
	}
	if busy {
		return CheckpointRef{}, fmt.Errorf("%w: thread %s has a pending or running run", ErrConflict, id)
	}
	ctx, cancel := context.WithTimeout(e.ctx, hostCallTimeout)
	defer cancel()
	var out struct {
		Checkpoint CheckpointRef `json:"checkpoint"`
		State      hostOutcome   `json:"state"`
	}
	var vals any
	if values != nil {
		vals = values
	}
	if err := g.host.Call(ctx, "update_state", map[string]any{"graph_id": g.ID, "thread_id": id, "values": vals, "as_node": asNode,
		"checkpoint_id": at.CheckpointID, "checkpoint_ns": at.CheckpointNS, "config": e.hostThreadConfig(id)}, &out); err != nil {
		return CheckpointRef{}, stateUpdateError(id, err)
	}
	err = e.store.Update(context.Background(), func(tx Tx) error {
		t, err := tx.GetThread(id)
		if err != nil {
			return nil // deleted meanwhile
		}
		t.Values, t.Interrupts, t.UpdatedAt = out.State.Values, out.State.interruptsByTask(), e.now()
		if !t.busy() {
			// As the reference: a thread whose latest checkpoint still has
			// nodes to run is interrupted, whether or not they carry an
			// interrupt (an update next to an interrupt leaves it pending).
			t.Status = ThreadIdle
			if len(out.State.Interrupts) > 0 || len(out.State.Next) > 0 {
				t.Status = ThreadInterrupted
			}
		}
		return tx.PutThread(t)
	})
	return out.Checkpoint, err
}
