package config

import (
	"fmt"
	"math"
	"os"
	"strings"
)

// Swarm configures the swarm runtime (SLIPWAY_RUNTIME=swarm): the
// registry its images go through, and the request rate its autoscaler
// keeps each API replica at. The registry's password is a secret like
// the master key: in the environment, or in a file (_FILE).
type Swarm struct {
	Registry             string `env:"SLIPWAY_REGISTRY"`
	RegistryUsername     string `env:"SLIPWAY_REGISTRY_USERNAME"`
	RegistryPassword     string `env:"SLIPWAY_REGISTRY_PASSWORD"`
	RegistryPasswordFile string `env:"SLIPWAY_REGISTRY_PASSWORD_FILE"`
	// APIRequestsPerReplica: requests a second one API replica serves
	// before the autoscaler adds another (deployments with max_scale
	// above min_scale).
	APIRequestsPerReplica float64 `env:"SLIPWAY_SWARM_API_REQUESTS_PER_REPLICA" envDefault:"100"`
}

// check validates the swarm settings; runtime is SLIPWAY_RUNTIME.
func (s *Swarm) check(runtime string) error {
	if s.RegistryPassword != "" && s.RegistryPasswordFile != "" {
		return &Error{"SLIPWAY_REGISTRY_PASSWORD and SLIPWAY_REGISTRY_PASSWORD_FILE: set only one"}
	}
	if !(s.APIRequestsPerReplica > 0) || math.IsInf(s.APIRequestsPerReplica, 0) {
		return &Error{fmt.Sprintf("SLIPWAY_SWARM_API_REQUESTS_PER_REPLICA: %v is not a request rate (a number above 0)", s.APIRequestsPerReplica)}
	}
	if runtime != "swarm" {
		return nil
	}
	if s.Registry == "" {
		return &Error{"SLIPWAY_REGISTRY: the swarm runtime needs a registry (host[:port]) the swarm's nodes pull images from"}
	}
	if strings.Contains(s.Registry, "://") || strings.ContainsAny(s.Registry, " \t\r\n/") {
		return &Error{fmt.Sprintf("SLIPWAY_REGISTRY: %q is not a registry address (host[:port], without a scheme or path)", s.Registry)}
	}
	if s.RegistryPasswordFile != "" {
		raw, err := os.ReadFile(s.RegistryPasswordFile)
		if err != nil {
			return &Error{"SLIPWAY_REGISTRY_PASSWORD_FILE: the file cannot be read"}
		}
		s.RegistryPassword = strings.TrimRight(string(raw), "\r\n")
	}
	if (s.RegistryUsername == "") != (s.RegistryPassword == "") {
		return &Error{"SLIPWAY_REGISTRY_USERNAME and SLIPWAY_REGISTRY_PASSWORD: set both or neither"}
	}
	return nil
}
