package agentapi

import (
	"time"

	"slipway/runtime/agent"
)

// threadState is a thread's state as the API answers it. A thread without
// checkpoints (it never ran, or its only run was rolled back) names none:
// checkpoint, metadata and created_at are null, as both reference servers
// answer, where the engine's state has an empty checkpoint id.
type threadState struct {
	Values       map[string]any       `json:"values"`
	Next         []string             `json:"next"`
	Tasks        []any                `json:"tasks"`
	Checkpoint   *agent.CheckpointRef `json:"checkpoint"`
	Metadata     map[string]any       `json:"metadata"`
	CreatedAt    *time.Time           `json:"created_at"`
	ParentConfig *agent.CheckpointRef `json:"parent_checkpoint"`
	Interrupts   []any                `json:"interrupts"`
}

// stateOut is reply's argument for a thread's state.
func stateOut(cp agent.Checkpoint, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	out := threadState{Values: cp.Values, Next: cp.Next, Tasks: cp.Tasks, ParentConfig: cp.ParentConfig, Interrupts: cp.Interrupts}
	if cp.Checkpoint.CheckpointID != "" {
		out.Checkpoint, out.Metadata, out.CreatedAt = &cp.Checkpoint, cp.Metadata, &cp.CreatedAt
	}
	return out, nil
}
