// Package agentapi serves one deployment's agent server API.
package agentapi

import (
	"context"
	"errors"

	"github.com/rs/zerolog"

	"slipway/config"
)

// Run serves the agent API until ctx ends. (Being built: see the agent-server issue.)
func Run(ctx context.Context, cfg config.Agent, log zerolog.Logger, version string) error {
	return errors.New("slipway agent is not built yet")
}
