package docker

import (
	"github.com/moby/moby/api/types/container"
)

// withDefaultMemory gives every container of a deployment whose spec
// names no memory limit the install's default (SLIPWAY_DEFAULT_MEMORY_LIMIT_MB;
// 0: none), so that a memory hog is killed inside its own container rather
// than by the host's OOM killer, wherever that strikes. A reservation
// (memory_mb) above the default raises the limit to it: the engine
// refuses a reservation above the limit.
func withDefaultMemory(r container.Resources, mb int) container.Resources {
	if r.Memory != 0 || mb <= 0 {
		return r
	}
	r.Memory = max(int64(mb)<<20, r.MemoryReservation)
	return r
}

// applyDefaultMemory applies withDefaultMemory to the agent, init
// containers and sidecars of p.
func (p *plan) applyDefaultMemory(mb int) {
	p.resources = withDefaultMemory(p.resources, mb)
	for i := range p.inits {
		p.inits[i].resources = withDefaultMemory(p.inits[i].resources, mb)
	}
	for i := range p.sidecars {
		p.sidecars[i].resources = withDefaultMemory(p.sidecars[i].resources, mb)
	}
}
