package process

import (
	"context"

	"slipway/runtime"
)

// Usage reads the deployment's cgroup: its agent, language hosts and
// everything they started (runtime.UsageReporter). Without cgroups
// (limits.go) nothing is known.
func (d *Driver) Usage(_ context.Context, dep string) (runtime.Usage, bool) {
	cpu, mem, ok := d.cgroups.Usage(dep)
	return runtime.Usage{CPUSeconds: cpu, MemoryBytes: mem}, ok
}
