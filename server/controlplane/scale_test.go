package controlplane

import (
	"strings"
	"testing"

	"slipway/runtime"
	"slipway/runtime/fake"
)

// oneProcess is a driver that runs no replicas (no runtime.Scaler).
type oneProcess struct{ runtime.Driver }

func (oneProcess) Name() string { return "docker" }

func TestScaleUnavailable(t *testing.T) {
	for _, tc := range []struct {
		pg, redis string
		driver    runtime.Driver
		want      string // "" : available
	}{
		{"", "", fake.New(0), "SLIPWAY_POSTGRES_URL and SLIPWAY_REDIS_URL are not set"},
		{"postgres://h/db", "", fake.New(0), "(SLIPWAY_REDIS_URL is not set)"},
		{"", "redis://h", fake.New(0), "(SLIPWAY_POSTGRES_URL is not set)"},
		{"postgres://h/db", "redis://h", oneProcess{}, "the docker runtime runs one agent process per deployment"},
		{"postgres://h/db", "redis://h", fake.New(0), ""},
	} {
		got := scaleUnavailable(tc.pg, tc.redis, tc.driver)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("pg %q redis %q %s: %q, want %q", tc.pg, tc.redis, tc.driver.Name(), got, tc.want)
		}
	}
}
