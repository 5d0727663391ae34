package config

import (
	"fmt"
	"os"
	"strings"
)

// Swarm configures the swarm runtime (SLIPWAY_RUNTIME=swarm): the
// registry its images go through. The registry's password is a secret
// like the master key: in the environment, or in a file (_FILE).
type Swarm struct {
	Registry             string `env:"SLIPWAY_REGISTRY"`
	RegistryUsername     string `env:"SLIPWAY_REGISTRY_USERNAME"`
	RegistryPassword     string `env:"SLIPWAY_REGISTRY_PASSWORD"`
	RegistryPasswordFile string `env:"SLIPWAY_REGISTRY_PASSWORD_FILE"`
}

// check validates the swarm settings; runtime is SLIPWAY_RUNTIME.
func (s *Swarm) check(runtime string) error {
	if s.RegistryPassword != "" && s.RegistryPasswordFile != "" {
		return &Error{"SLIPWAY_REGISTRY_PASSWORD and SLIPWAY_REGISTRY_PASSWORD_FILE: set only one"}
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
