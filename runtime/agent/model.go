// Package agent is the engine of `slipway agent`: threads, runs and their
// checkpoints in a bbolt file, multitask admission in one transaction, a
// bounded pool of run workers, and the graphs runs execute.
package agent

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Run statuses.
const (
	RunPending     = "pending"
	RunRunning     = "running"
	RunSuccess     = "success"
	RunError       = "error"
	RunTimeout     = "timeout"
	RunInterrupted = "interrupted"
)

// Thread statuses.
const (
	ThreadIdle        = "idle"
	ThreadBusy        = "busy"
	ThreadInterrupted = "interrupted"
	ThreadError       = "error"
)

// Multitask strategies.
const (
	StrategyReject    = "reject"
	StrategyInterrupt = "interrupt"
	StrategyRollback  = "rollback"
	StrategyEnqueue   = "enqueue"
)

// Assistant is a configured graph.
type Assistant struct {
	AssistantID string         `json:"assistant_id"`
	GraphID     string         `json:"graph_id"`
	Name        string         `json:"name"`
	Description *string        `json:"description"`
	Config      map[string]any `json:"config"`
	Context     map[string]any `json:"context"`
	Metadata    map[string]any `json:"metadata"`
	Version     int            `json:"version"`
	CreatedAt   time.Time      `json:"created_at"`
	UpdatedAt   time.Time      `json:"updated_at"`
}

// Thread is a conversation: its state is its latest checkpoint's values.
type Thread struct {
	ThreadID   string         `json:"thread_id"`
	CreatedAt  time.Time      `json:"created_at"`
	UpdatedAt  time.Time      `json:"updated_at"`
	Metadata   map[string]any `json:"metadata"`
	Config     map[string]any `json:"config"`
	Status     string         `json:"status"`
	Values     map[string]any `json:"values"`
	Interrupts map[string]any `json:"interrupts"`
	// Error is how the thread's last run ended if not by succeeding: its
	// failure, or the cancel that stopped it (UserInterrupt,
	// UserRollback), as the Python reference server shows it and the JS
	// SDK's Thread type has it; null after a success.
	Error *RunFailure `json:"error"`
}

// threadRecord is how a thread is stored: Active is its running run and
// Queue its pending ones, oldest first, so multitask admission reads one
// record; Seq numbers its checkpoints.
type threadRecord struct {
	Thread
	Active string   `json:"active,omitempty"`
	Queue  []string `json:"queue,omitempty"`
	Seq    uint64   `json:"seq"`
	// Graph names the host graph whose checkpoints hold the thread's
	// state (set by its first run of one); state, history and updates
	// then go to the host.
	Graph string `json:"graph,omitempty"`
	// TTL is the thread's time-to-live, nil when it has none (ttl.go).
	TTL *ttlPolicy `json:"ttl_policy,omitempty"`
}

func (r *threadRecord) busy() bool { return r.Active != "" || len(r.Queue) > 0 }

func (r *threadRecord) view() Thread {
	t := r.Thread
	if t.Values == nil {
		t.Values = map[string]any{}
	}
	if t.Metadata == nil {
		t.Metadata = map[string]any{}
	}
	if t.Config == nil {
		t.Config = map[string]any{}
	}
	if t.Interrupts == nil {
		t.Interrupts = map[string]any{}
	}
	return t
}

// Run is one execution of an assistant on a thread.
type Run struct {
	RunID             string         `json:"run_id"`
	ThreadID          string         `json:"thread_id"`
	AssistantID       string         `json:"assistant_id"`
	CreatedAt         time.Time      `json:"created_at"`
	UpdatedAt         time.Time      `json:"updated_at"`
	Status            string         `json:"status"`
	Metadata          map[string]any `json:"metadata"`
	Kwargs            map[string]any `json:"kwargs"`
	MultitaskStrategy string         `json:"multitask_strategy"`
	// Error says why a run ended error or timeout.
	Error string `json:"error,omitempty"`
	// Temporary threads (stateless runs) are deleted after their run.
	Temporary bool `json:"-"`
}

type runRecord struct {
	Run
	Temporary bool `json:"temporary,omitempty"`
	// FirstSeq is the thread's checkpoint sequence before this run, so a
	// rollback can delete what the run wrote.
	FirstSeq uint64 `json:"first_seq"`
	// Lease is the claim the run runs under when it expires (store_queue.go);
	// nil for a claim held until the run ends.
	Lease *runLease `json:"lease,omitempty"`
	// NotBefore is when a run created with after_seconds may start; it
	// waits in the thread's queue until then.
	NotBefore *time.Time `json:"not_before,omitempty"`
	// CancelAction is set by Cancel on a running run, which it records
	// interrupted at once (what a client reads right after the cancel, as on
	// the reference servers) while the run unwinds; its end keeps that
	// outcome (interrupt, or rollback).
	CancelAction string `json:"cancel_action,omitempty"`
	// CancelReason is why, in the words the thread's error then shows
	// (Thread.Error); empty for a newer run's multitask strategy.
	CancelReason string `json:"cancel_reason,omitempty"`
	// Attempt counts the leased claims of the run (replicas.go): 1 for
	// its first worker, more when another took it over; 0 for a run
	// never claimed under a lease.
	Attempt int `json:"attempt,omitempty"`
	// Failure is a failed run's error as its error event showed it, which
	// a join after its end answers (JoinEnded).
	Failure *RunFailure `json:"failure,omitempty"`
}

// RunFailure is a failed run's error: its class and message.
type RunFailure struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// Checkpoint is one state of a thread.
type Checkpoint struct {
	Values       map[string]any `json:"values"`
	Next         []string       `json:"next"`
	Tasks        []any          `json:"tasks"`
	Checkpoint   CheckpointRef  `json:"checkpoint"`
	Metadata     map[string]any `json:"metadata"`
	CreatedAt    time.Time      `json:"created_at"`
	ParentConfig *CheckpointRef `json:"parent_checkpoint"`
	Interrupts   []any          `json:"interrupts"`
}

// CheckpointRef names a checkpoint.
type CheckpointRef struct {
	ThreadID     string `json:"thread_id"`
	CheckpointNS string `json:"checkpoint_ns"`
	CheckpointID string `json:"checkpoint_id"`
}

// Item is a store item.
type Item struct {
	Namespace []string       `json:"namespace"`
	Key       string         `json:"key"`
	Value     map[string]any `json:"value"`
	CreatedAt time.Time      `json:"created_at"`
	UpdatedAt time.Time      `json:"updated_at"`
}

// NormalizeMessage turns an input message ({role, content} or a message
// dict) into a message dict with type, content and a stable id.
func NormalizeMessage(m any) (map[string]any, error) {
	var msg map[string]any
	switch v := m.(type) {
	case map[string]any:
		msg = make(map[string]any, len(v)+2)
		for k, val := range v {
			msg[k] = val
		}
	case string:
		msg = map[string]any{"type": "human", "content": v}
	default:
		return nil, fmt.Errorf("a message must be an object or a string, not %T", m)
	}
	if role, ok := msg["role"].(string); ok {
		typ, ok := map[string]string{"user": "human", "human": "human", "assistant": "ai", "ai": "ai",
			"system": "system", "developer": "system", "tool": "tool"}[role]
		if !ok {
			return nil, fmt.Errorf("message role %q is not one of user, assistant, system, tool", role)
		}
		msg["type"] = typ
		delete(msg, "role")
	}
	typ, _ := msg["type"].(string)
	switch typ {
	case "human", "ai", "system", "tool":
	case "":
		return nil, fmt.Errorf("a message needs a role or a type")
	default:
		return nil, fmt.Errorf("message type %q is not one of human, ai, system, tool", typ)
	}
	switch msg["content"].(type) {
	case string, []any:
	case nil:
		msg["content"] = ""
	default:
		return nil, fmt.Errorf("message content must be a string or a list of content blocks")
	}
	if id, _ := msg["id"].(string); id == "" {
		msg["id"] = uuid.NewString()
	}
	return msg, nil
}

// ApplyUpdate merges an update into thread values: `messages` is appended
// to, replacing messages with the same id; other keys are overwritten.
func ApplyUpdate(values, update map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(values)+len(update))
	for k, v := range values {
		out[k] = v
	}
	for k, v := range update {
		if k != "messages" {
			out[k] = v
			continue
		}
		var incoming []any
		switch mv := v.(type) {
		case []any:
			incoming = mv
		case nil:
			continue
		default:
			incoming = []any{mv}
		}
		existing, _ := out["messages"].([]any)
		merged := append([]any(nil), existing...)
		index := map[string]int{}
		for i, m := range merged {
			if mm, ok := m.(map[string]any); ok {
				if id, ok := mm["id"].(string); ok {
					index[id] = i
				}
			}
		}
		for _, m := range incoming {
			nm, err := NormalizeMessage(m)
			if err != nil {
				return nil, err
			}
			id := nm["id"].(string)
			if i, ok := index[id]; ok {
				merged[i] = nm
				continue
			}
			index[id] = len(merged)
			merged = append(merged, nm)
		}
		out["messages"] = merged
	}
	return out, nil
}

// clone deep-copies a JSON value.
func clone(v map[string]any) map[string]any {
	if v == nil {
		return map[string]any{}
	}
	raw, _ := json.Marshal(v)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return out
}
