package agentapi

import (
	"net/http/httptest"
	"testing"
)

// TestQuietRequests: the access log leaves out the control plane's
// health checks and metrics reads, and only those, unless
// SLIPWAY_LOG_HEALTH_CHECKS=true.
func TestQuietRequests(t *testing.T) {
	quiet := healthCheck(func(string) string { return "" })
	for _, c := range []struct {
		method, path string
		want         bool
	}{
		{"GET", "/ok", true},
		{"HEAD", "/ok", true},
		{"GET", "/metrics", true},
		{"POST", "/metrics", false},
		{"GET", "/threads", false},
		{"GET", "/metrics/x", false},
	} {
		if got := quiet(httptest.NewRequest(c.method, c.path, nil)); got != c.want {
			t.Errorf("%s %s quiet: %v, want %v", c.method, c.path, got, c.want)
		}
	}
	if healthCheck(func(string) string { return "true" }) != nil {
		t.Error("SLIPWAY_LOG_HEALTH_CHECKS=true still leaves requests out")
	}
}
