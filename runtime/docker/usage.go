package docker

import (
	"context"
	"encoding/json"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"slipway/runtime"
)

// Usage asks the engine for the serving container's stats, one sample
// (runtime.UsageReporter). Memory leaves out the inactive page cache, as
// `docker stats` does.
func (d *Driver) Usage(ctx context.Context, dep string) (runtime.Usage, bool) {
	d.mu.Lock()
	s, ok := d.deps[dep]
	d.mu.Unlock()
	if !ok || s.container == "" {
		return runtime.Usage{}, false
	}
	res, err := d.Client.ContainerStats(ctx, s.container, client.ContainerStatsOptions{})
	if err != nil {
		return runtime.Usage{}, false
	}
	defer res.Body.Close()
	var st container.StatsResponse
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
		return runtime.Usage{}, false
	}
	mem := int64(st.MemoryStats.Usage)
	for _, k := range []string{"inactive_file", "total_inactive_file"} {
		if v, ok := st.MemoryStats.Stats[k]; ok && v <= st.MemoryStats.Usage {
			mem = int64(st.MemoryStats.Usage - v)
			break
		}
	}
	return runtime.Usage{CPUSeconds: float64(st.CPUStats.CPUUsage.TotalUsage) / 1e9, MemoryBytes: mem}, true
}
