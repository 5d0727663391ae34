package config

import (
	"fmt"
	"math"
)

// Limits are the resources a deployment gets when its resource_spec does
// not say. The process runtime enforces them with cgroups (memory
// without swap, processes and threads, CPU quota), the docker runtime
// applies the memory limit to every container whose spec names none.
// Zero means no limit.
type Limits struct {
	// DefaultMemoryLimitMB stands in for memory_limit_mb.
	DefaultMemoryLimitMB int `env:"SLIPWAY_DEFAULT_MEMORY_LIMIT_MB" envDefault:"2048"`
	// DefaultCPULimit stands in for cpu_limit, in cores. Unlimited by
	// default: CPU contention slows a host down but does not take it down,
	// and builds use every core they get.
	DefaultCPULimit float64 `env:"SLIPWAY_DEFAULT_CPU_LIMIT" envDefault:"0"`
	// PidsLimit bounds one deployment's processes and threads on the
	// process runtime (resource_spec has no field for it; docker
	// containers have 1024 each).
	PidsLimit int `env:"SLIPWAY_PIDS_LIMIT" envDefault:"1024"`
}

func (l Limits) check() error {
	if l.DefaultMemoryLimitMB != 0 && (l.DefaultMemoryLimitMB < 64 || l.DefaultMemoryLimitMB > 1<<21) {
		return &Error{fmt.Sprintf("SLIPWAY_DEFAULT_MEMORY_LIMIT_MB: %d is outside 64..2097152 (or 0: no limit)", l.DefaultMemoryLimitMB)}
	}
	if c := l.DefaultCPULimit; math.IsNaN(c) || c != 0 && (c < 0.01 || c > 1024) {
		return &Error{fmt.Sprintf("SLIPWAY_DEFAULT_CPU_LIMIT: %g is outside 0.01..1024 (or 0: no limit)", c)}
	}
	if l.PidsLimit != 0 && (l.PidsLimit < 16 || l.PidsLimit > 4194304) {
		return &Error{fmt.Sprintf("SLIPWAY_PIDS_LIMIT: %d is outside 16..4194304 (or 0: no limit)", l.PidsLimit)}
	}
	return nil
}
