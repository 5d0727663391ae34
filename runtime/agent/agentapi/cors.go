package agentapi

import (
	"fmt"
	"os"

	"slipway/runtime/build"
	"slipway/server/cors"
)

// projectCORS is the deployment's http.cors as a policy (nil when the
// graph configuration has none). The build checked it already; an agent
// run by hand gets the same error.
func projectCORS(graphConfig string) (*cors.Policy, error) {
	if graphConfig == "" {
		return nil, nil
	}
	raw, err := os.ReadFile(graphConfig)
	if err != nil {
		return nil, fmt.Errorf("read graph configuration: %w", err)
	}
	c, err := build.ProjectCORS(raw)
	if err != nil || c == nil {
		return nil, err
	}
	policy, err := cors.New(*c)
	if err != nil {
		return nil, fmt.Errorf("graph configuration: http.cors: %w", err)
	}
	return policy, nil
}
