package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"slipway/runtime/agent/hosts"
	"slipway/storage"
)

// StateUpdate is one update of a superstep: values (or a command) applied
// as node AsNode, as update_state applies them.
type StateUpdate struct {
	Values  any            `json:"values"`
	Command map[string]any `json:"command"`
	AsNode  string         `json:"as_node"`
}

// Superstep is a set of updates applied together: one checkpoint.
type Superstep struct {
	Updates []StateUpdate `json:"updates"`
}

// CreateThreadWithSupersteps creates a thread and applies supersteps to
// its state in order, as the reference servers apply "supersteps" in a
// thread's create request (the SDKs' threads.create({supersteps}), used to
// copy a thread between deployments): each superstep becomes one
// checkpoint holding its updates, each applied as its own node. The graph
// is the one metadata.graph_id names.
//
// Unlike the reference (which creates the thread and then reports a
// failed update with status 201), it is all or nothing: a superstep that
// cannot be applied leaves no thread and no checkpoint behind.
//
// ttl is the new thread's TTL (nil: the configured default); an existing
// thread (do_nothing) keeps its own.
func (e *Engine) CreateThreadWithSupersteps(id string, metadata map[string]any, ifExists string, steps []Superstep, ttl *ThreadTTL) (Thread, error) {
	if ttl != nil {
		if err := ValidTTL(*ttl); err != nil {
			return Thread{}, err
		}
	}
	if len(steps) == 0 {
		return e.createThread(id, metadata, ifExists, ttl)
	}
	graphID, _ := metadata["graph_id"].(string)
	if graphID == "" {
		return Thread{}, fmt.Errorf("%w: Thread %s has no graph ID: supersteps need metadata.graph_id (the SDKs' graph_id) naming the graph whose nodes apply them", ErrBadRequest, cmpID(id))
	}
	g, ok := e.Graphs[graphID]
	if !ok {
		return Thread{}, fmt.Errorf("%w: Graph '%s' not found", ErrNotFound, graphID)
	}
	for i, s := range steps {
		for j, u := range s.Updates {
			if u.Values == nil && u.Command == nil {
				return Thread{}, fmt.Errorf("%w: supersteps[%d].updates[%d] has neither values nor command", ErrInvalid, i, j)
			}
		}
	}
	if id == "" {
		id = storage.NewID().String()
	}
	if hg, ok := g.(*HostGraph); ok {
		return e.hostCreateWithSupersteps(hg, id, metadata, ifExists, steps, ttl)
	}
	var out Thread
	err := e.store.Update(context.Background(), func(tx Tx) error {
		t, err := newThreadRecord(tx, id, metadata, ifExists)
		if err != nil {
			return err
		}
		if t != nil {
			if err := e.initialTTL(tx, t, ttl); err != nil {
				return err
			}
		} else {
			// do_nothing on an existing thread: as on the reference, the
			// supersteps apply to it.
			if t, err = tx.GetThread(id); err != nil {
				return err
			}
			if t.busy() {
				return fmt.Errorf("%w: thread %s has a pending or running run", ErrConflict, id)
			}
		}
		for i, s := range steps {
			values := t.Values
			writes := map[string]any{}
			for j, u := range s.Updates {
				if u.Command != nil {
					return fmt.Errorf("%w: supersteps[%d].updates[%d]: a command needs a LangGraph graph; graph %q takes values", ErrInvalid, i, j, graphID)
				}
				m, ok := u.Values.(map[string]any)
				if !ok {
					return fmt.Errorf("%w: supersteps[%d].updates[%d].values must be an object", ErrInvalid, i, j)
				}
				if values, err = ApplyUpdate(values, m); err != nil {
					return fmt.Errorf("%w: supersteps[%d].updates[%d]: %v", ErrInvalid, i, j, err)
				}
				writes[asNodeOr(u.AsNode)] = m
			}
			if _, err := writeCheckpoint(tx, t, values, "update", int(t.Seq), writes, nil); err != nil {
				return err
			}
		}
		t.UpdatedAt = time.Now().UTC()
		out = t.view()
		return tx.PutThread(t)
	})
	return out, err
}

// newThreadRecord is CreateThread's check inside tx: a new record (not
// yet stored), nil for an existing thread under do_nothing, or a conflict.
func newThreadRecord(tx ReadTx, id string, metadata map[string]any, ifExists string) (*threadRecord, error) {
	if tx.ThreadExists(id) {
		if ifExists == "do_nothing" {
			return nil, nil
		}
		return nil, fmt.Errorf("%w: thread %s already exists", ErrConflict, id)
	}
	now := time.Now().UTC()
	return &threadRecord{Thread: Thread{ThreadID: id, CreatedAt: now, UpdatedAt: now, Metadata: metadata,
		Status: ThreadIdle, Values: map[string]any{}}}, nil
}

// hostCreateWithSupersteps has the host apply the supersteps (its graph's
// bulk update, writing the checkpoints through the engine's saver) before
// the thread exists — the saver takes writes outside runs for a thread it
// does not know, and no run can be admitted on it meanwhile — then
// creates the thread with the state the host computed. A failure deletes
// what the host wrote.
func (e *Engine) hostCreateWithSupersteps(g *HostGraph, id string, metadata map[string]any, ifExists string, steps []Superstep, ttl *ThreadTTL) (Thread, error) {
	if g.host == nil {
		return Thread{}, fmt.Errorf("graph %q: its language host is not running", g.ID)
	}
	created := true
	var cfg map[string]any
	err := e.store.ViewThread(context.Background(), id, func(tx ReadTx) error {
		t, err := newThreadRecord(tx, id, metadata, ifExists)
		if err != nil {
			return err
		}
		if t == nil {
			created = false
			old, err := tx.GetThread(id)
			if err != nil {
				return err
			}
			if old.Graph != "" && old.Graph != g.ID {
				return fmt.Errorf("%w: thread %s holds the state of graph %q, not %q", ErrConflict, id, old.Graph, g.ID)
			}
			cfg = e.threadConfig(tx, old)
		}
		return nil
	})
	if err != nil {
		return Thread{}, err
	}
	ctx, cancel := context.WithTimeout(e.ctx, hostCallTimeout)
	defer cancel()
	var out struct {
		Checkpoint CheckpointRef `json:"checkpoint"`
		State      hostOutcome   `json:"state"`
	}
	callErr := g.host.Call(ctx, "bulk_update_state", map[string]any{"graph_id": g.ID, "thread_id": id, "config": nilIfEmpty(cfg),
		"supersteps": steps}, &out)
	if callErr != nil {
		if created {
			if err := e.store.Update(context.Background(), func(tx Tx) error {
				if tx.ThreadExists(id) {
					return nil // created by another request meanwhile: its state is its own
				}
				return deleteLG(tx, id, "")
			}); err != nil {
				e.Log.Error().Err(err).Str("thread_id", id).Msg("drop the checkpoints of failed supersteps")
			}
		}
		return Thread{}, stateUpdateError(id, callErr)
	}
	var thread Thread
	err = e.store.Update(context.Background(), func(tx Tx) error {
		t, err := tx.GetThread(id)
		if err != nil {
			if !created {
				return fmt.Errorf("%w: thread %s", ErrNotFound, id)
			}
			if t, err = newThreadRecord(tx, id, metadata, "raise"); err != nil {
				return err
			}
			if err := e.initialTTL(tx, t, ttl); err != nil {
				return err
			}
		}
		t.Graph = g.ID
		t.Values, t.Interrupts, t.UpdatedAt = out.State.Values, out.State.interruptsByTask(), time.Now().UTC()
		if !t.busy() {
			t.Status = ThreadIdle
			if len(out.State.Interrupts) > 0 || len(out.State.Next) > 0 {
				t.Status = ThreadInterrupted
			}
		}
		thread = t.view()
		return tx.PutThread(t)
	})
	return thread, err
}

// threadConfig is the config a thread's graph is built with for reads and
// updates of its state, as the reference servers keep it on the thread:
// its assistant's config under the config its runs were given.
func (e *Engine) threadConfig(tx ReadTx, t *threadRecord) map[string]any {
	var layers []map[string]any
	if aid, _ := t.Metadata["assistant_id"].(string); aid != "" {
		if a, err := e.ResolveAssistant(tx, aid); err == nil {
			layers = append(layers, a.Config)
		}
	} else if gid, _ := t.Metadata["graph_id"].(string); gid != "" {
		if a, err := e.ResolveAssistant(tx, gid); err == nil {
			layers = append(layers, a.Config)
		}
	}
	return mergeConfig(append(layers, t.Config)...)
}

// hostThreadConfig is threadConfig for a thread id, nil when it is gone.
func (e *Engine) hostThreadConfig(id string) map[string]any {
	var cfg map[string]any
	_ = e.store.ViewThread(context.Background(), id, func(tx ReadTx) error {
		t, err := tx.GetThread(id)
		if err == nil {
			cfg = e.threadConfig(tx, t)
		}
		return nil
	})
	if len(cfg) == 0 {
		return nil
	}
	return cfg
}

// badUpdates are the errors of a graph refusing a state update (a node
// that does not exist, a value its channels refuse), which the reference
// servers answer 400 with the error's message.
var badUpdates = map[string]bool{"InvalidUpdateError": true, "ValueError": true, "EmptyInputError": true}

// stateUpdateError maps a host's refusal of a state update (update_state,
// supersteps): 409 for a thread that has a run, 400 with the message for
// an update the graph refuses, as the reference servers answer; 422 for
// any other failure of the graph.
func stateUpdateError(thread string, err error) error {
	var he *hosts.Error
	switch {
	case errors.As(err, &he) && strings.Contains(he.Message, ErrFenced.Error()):
		return fmt.Errorf("%w: thread %s has a pending or running run", ErrConflict, thread)
	case errors.As(err, &he) && badUpdates[he.Type]:
		return fmt.Errorf("%w: %s", ErrBadRequest, he.Message)
	}
	return fmt.Errorf("%w: %v", ErrInvalid, err)
}

func asNodeOr(n string) string {
	if n == "" {
		return "__update__"
	}
	return n
}

func cmpID(id string) string {
	if id == "" {
		return "(new)"
	}
	return id
}
