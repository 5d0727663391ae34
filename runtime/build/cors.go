package build

import (
	"bytes"
	"encoding/json"
	"fmt"

	"slipway/server/cors"
)

// parseCORS reads http.cors (the reference's CorsConfig keys) and checks
// it as the agent will apply it, so that a policy a browser would refuse
// (credentials for every origin) or a broken regex fails the build with
// the key's name instead of surfacing as blocked requests in a browser.
// Absent: nil.
func parseCORS(keys map[string]json.RawMessage) (*cors.Config, error) {
	raw, ok := keys["http"]
	if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil
	}
	var http struct {
		CORS json.RawMessage `json:"cors"`
	}
	if err := json.Unmarshal(raw, &http); err != nil {
		return nil, fmt.Errorf("graph configuration: http must be an object: %w", err)
	}
	if len(http.CORS) == 0 || bytes.Equal(bytes.TrimSpace(http.CORS), []byte("null")) {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(http.CORS))
	dec.DisallowUnknownFields()
	var c cors.Config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("graph configuration: http.cors: %w", err)
	}
	if _, err := cors.New(c); err != nil {
		return nil, fmt.Errorf("graph configuration: http.cors: %w", err)
	}
	return &c, nil
}

// ProjectCORS is http.cors of the graph configuration raw, checked as
// ParseProject does, without the build's other checks (the agent needs
// this key alone).
func ProjectCORS(raw []byte) (*cors.Config, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		return nil, fmt.Errorf("graph configuration is not a valid JSON object: %w", err)
	}
	return parseCORS(keys)
}
