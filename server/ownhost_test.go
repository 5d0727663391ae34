package server_test

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"slipway/server/apptest"
	"slipway/server/servertest"
)

// TestCustomURLNamingSlipwayRefused: a custom_url whose host reaches
// Slipway itself (its public URL's, its agents URL's, its listen address,
// the machine when it listens on every address, any loopback name or
// address, whatever the port, case or trailing dot) is refused with 422
// at create and at PATCH: requests are routed by host name, so such a
// claim would take over requests meant for Slipway.
func TestCustomURLNamingSlipwayRefused(t *testing.T) {
	addr := servertest.FreeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	s := apptest.New(t, map[string]string{"SLIPWAY_ADDR": addr, "SLIPWAY_PUBLIC_URL": "http://slipway.example.test:" + port,
		"SLIPWAY_AGENTS_URL": "https://agents.example.test"})
	ext := func(name, custom string) map[string]any {
		return map[string]any{"name": name, "source": "external_docker", "source_config": map[string]any{"custom_url": custom},
			"source_revision_config": map[string]any{"image_uri": "img"}, "secrets": []any{}}
	}
	refused := func(t *testing.T, r *servertest.Response, custom string) {
		t.Helper()
		detail, _ := r.Map()["detail"].([]any)
		if r.Status != 422 || len(detail) != 1 || fmt.Sprint(detail[0].(map[string]any)["loc"]) != "[body source_config custom_url]" {
			t.Errorf("custom_url %q: %d %s, want 422 at body.source_config.custom_url", custom, r.Status, r.Body)
		}
	}
	own := []string{
		"http://slipway.example.test:" + port, "https://Slipway.Example.Test.", "slipway.example.test:9999",
		"https://agents.example.test", "AGENTS.example.test:8443/x",
		"http://127.0.0.1:" + port, "http://localhost:" + port, "localhost", "http://[::1]:" + port, "127.0.0.2", "agent.localhost",
		"http://0.0.0.0:" + port,
	}
	for i, custom := range own {
		refused(t, s.Do("POST", "/v2/deployments", ext(fmt.Sprintf("own-%d", i), custom)), custom)
	}
	r := s.Do("POST", "/v2/deployments", ext("elsewhere", "https://agent.example.com"))
	if r.Status != 201 {
		t.Fatalf("a host of its own: %d %s", r.Status, r.Body)
	}
	dep := r.Map()["id"].(string)
	for _, custom := range own[:4] {
		refused(t, s.Do("PATCH", "/v2/deployments/"+dep, map[string]any{"source_config": map[string]any{"custom_url": custom}}), custom)
	}
	if got := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["source_config"].(map[string]any)["custom_url"]; got != "https://agent.example.com" {
		t.Errorf("custom_url after the refused PATCHes: %v", got)
	}

	t.Run("listening on every address", func(t *testing.T) {
		name, err := os.Hostname()
		if err != nil || name == "" || strings.EqualFold(name, "localhost") {
			t.Skipf("the machine has no host name of its own (%q, %v)", name, err)
		}
		_, port, _ := net.SplitHostPort(servertest.FreeAddr(t))
		w := apptest.New(t, map[string]string{"SLIPWAY_ADDR": "0.0.0.0:" + port, "SLIPWAY_PUBLIC_URL": "https://slipway.example.test"})
		refused(t, w.Do("POST", "/v2/deployments", ext("machine", "http://"+name+":"+port)), name)
	})
}
