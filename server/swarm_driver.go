package server

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"slipway/config"
	"slipway/runtime"
	"slipway/runtime/docker"
	"slipway/runtime/swarm"
)

// swarmDriver is the swarm runtime (SLIPWAY_RUNTIME=swarm): the engine
// DOCKER_HOST names must be a manager of an active swarm. Builds and
// spec translation are the docker runtime's, configured as it would be.
func swarmDriver(cfg config.Serve, gate *runtime.Gate, log zerolog.Logger, instance, bin string) (runtime.Driver, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, api, err := docker.Connect(ctx)
	if err != nil {
		return unavailable{name: "swarm"}, "SLIPWAY_RUNTIME=swarm, but " + err.Error()
	}
	if err := swarm.CheckSwarm(ctx, c); err != nil {
		return unavailable{name: "swarm"}, "SLIPWAY_RUNTIME=swarm, but " + err.Error()
	}
	auth, err := swarm.EncodeAuth(cfg.Registry, cfg.RegistryUsername, cfg.RegistryPassword)
	if err != nil {
		return unavailable{name: "swarm"}, "SLIPWAY_RUNTIME=swarm, but " + err.Error()
	}
	dd := &docker.Driver{Client: c, Bin: bin, Root: filepath.Join(cfg.DataDir, "builds"),
		SecretsDir: filepath.Join(cfg.DataDir, "secrets"), Gate: gate, APIAddr: cfg.Addr, Instance: instance, ImageCache: cfg.ImageCache,
		PythonBaseImage: cfg.PythonBaseImage, NodeBaseImage: cfg.NodeBaseImage, BasePullTimeout: cfg.BasePullTimeout,
		DefaultMemoryMB: cfg.DefaultMemoryLimitMB, Log: log.With().Str("component", "docker-runtime").Logger()}
	d := &swarm.Driver{Client: c, Docker: dd, Registry: cfg.Registry, RegistryAuth: auth, APIRequestsPerReplica: cfg.APIRequestsPerReplica,
		Log: log.With().Str("component", "swarm-runtime").Logger()}
	return d, fmt.Sprintf("SLIPWAY_RUNTIME=swarm: a Swarm manager answers at %s (API %s); images go through %s", c.DaemonHost(), api, cfg.Registry)
}

// wireAutoscale gives a driver with an autoscaler (the swarm runtime's)
// the deployments' logs for its decisions and registers its metrics.
func wireAutoscale(d runtime.Driver, out runtime.Output, m *metrics) {
	if e, ok := d.(interface{ ScaleEvents(runtime.Output) }); ok {
		e.ScaleEvents(out)
	}
	if c, ok := d.(prometheus.Collector); ok && m != nil {
		m.reg.MustRegister(c)
	}
}
