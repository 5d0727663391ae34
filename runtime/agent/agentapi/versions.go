package agentapi

import (
	"time"

	"slipway/runtime/agent"
)

// assistantVersion is an entry of POST /assistants/{id}/versions: a
// version is written once, so it has a creation time and no updated_at,
// as on both reference servers.
type assistantVersion struct {
	agent.Assistant
	// Shadows the assistant's updated_at (encoding/json takes the
	// shallower field); always nil, so it is left out.
	UpdatedAt *time.Time `json:"updated_at,omitempty"`
}

func versionsOut(all []agent.Assistant, err error) ([]assistantVersion, error) {
	if err != nil {
		return nil, err
	}
	out := make([]assistantVersion, 0, len(all))
	for _, a := range all {
		out = append(out, assistantVersion{Assistant: a})
	}
	return out, nil
}
