package runtime

import "context"

// Usage is what a deployment's agent (with everything it started) uses.
type Usage struct {
	// CPUSeconds is the CPU time used since the agent's cgroup or
	// container was created; negative when unknown.
	CPUSeconds float64
	// MemoryBytes is the memory in use now, without the page cache the
	// kernel may drop (as `docker stats` shows it); negative when unknown.
	MemoryBytes int64
}

// UsageReporter is a driver that can tell a deployment's resource usage:
// the process runtime from the deployment's cgroup, the docker runtime
// from the engine's stats. ok is false when it cannot.
type UsageReporter interface {
	Usage(ctx context.Context, deploymentID string) (u Usage, ok bool)
}
