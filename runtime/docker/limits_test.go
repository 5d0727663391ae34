package docker

import (
	"testing"

	"github.com/moby/moby/api/types/container"
)

func TestDefaultMemory(t *testing.T) {
	cases := []struct {
		name      string
		in        container.Resources
		defaultMB int
		want      int64
	}{
		{"none given: the default", container.Resources{}, 2048, 2048 << 20},
		{"a limit given stays", container.Resources{Memory: 300 << 20}, 2048, 300 << 20},
		{"a reservation above the default raises it", container.Resources{MemoryReservation: 3000 << 20}, 2048, 3000 << 20},
		{"default 0: no limit", container.Resources{}, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := &plan{resources: c.in, inits: []sidecar{{resources: c.in}}, sidecars: []sidecar{{resources: c.in}}}
			p.applyDefaultMemory(c.defaultMB)
			for what, got := range map[string]int64{"agent": p.resources.Memory, "init": p.inits[0].resources.Memory, "sidecar": p.sidecars[0].resources.Memory} {
				if got != c.want {
					t.Errorf("%s: memory %d, want %d", what, got, c.want)
				}
			}
		})
	}
}
