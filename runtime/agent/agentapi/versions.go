package agentapi

import (
	"time"

	"slipway/runtime/agent"
)

// assistantVersion is an entry of POST /assistants/{id}/versions: a
// version is written once, so it has a creation time and no updated_at,
// as on both reference servers.
type assistantVersion struct {
	AssistantID string         `json:"assistant_id"`
	GraphID     string         `json:"graph_id"`
	Name        string         `json:"name"`
	Description *string        `json:"description"`
	Config      map[string]any `json:"config"`
	Context     map[string]any `json:"context"`
	Metadata    map[string]any `json:"metadata"`
	Version     int            `json:"version"`
	CreatedAt   time.Time      `json:"created_at"`
}

func versionsOut(all []agent.Assistant, err error) ([]assistantVersion, error) {
	if err != nil {
		return nil, err
	}
	out := make([]assistantVersion, 0, len(all))
	for _, a := range all {
		out = append(out, assistantVersion{a.AssistantID, a.GraphID, a.Name, a.Description, a.Config, a.Context, a.Metadata, a.Version, a.CreatedAt})
	}
	return out, nil
}
