package apptest_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"slipway/server/apptest"
)

// TestRestartKeepsDataAddressAndKey: Restart closes the App and builds a
// new one on the same data directory and address; what was written before
// is still there, the initial key still works, and Logs holds only the new
// App's output (as it holds only the new process's for servertest.Start).
func TestRestartKeepsDataAddressAndKey(t *testing.T) {
	s := apptest.New(t, nil)
	r := s.Do("POST", "/api/v1/workspaces", map[string]any{"display_name": "durable"})
	if r.Status != 200 {
		t.Fatalf("create workspace: %d %s", r.Status, r.Body)
	}
	id := r.Map()["id"].(string)
	url, key := s.URL, s.Key
	if !strings.Contains(s.Logs(), "created organization Default") {
		t.Fatalf("first start's logs lack the bootstrap line:\n%s", s.Logs())
	}
	s.Restart()
	if s.URL != url || s.Key != key {
		t.Fatalf("restart moved the server: %s %q, was %s %q", s.URL, s.Key, url, key)
	}
	found := false
	wss, _ := s.Do("GET", "/api/v1/workspaces", nil).JSON().([]any)
	for _, w := range wss {
		found = found || w.(map[string]any)["id"] == id && w.(map[string]any)["display_name"] == "durable"
	}
	if !found {
		t.Fatalf("workspace %s missing after restart: %v", id, wss)
	}
	if strings.Contains(s.Logs(), "created organization Default") {
		t.Fatalf("restart bootstrapped again or kept the old logs:\n%s", s.Logs())
	}
}

// TestAppsSideBySide runs several control planes in one test binary at
// once (the race detector watches for state they would share): each sees
// only its own writes.
func TestAppsSideBySide(t *testing.T) {
	const n = 3
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := apptest.New(t, nil)
			name := fmt.Sprintf("app-%d", i)
			for j := range 5 {
				if r := s.Do("POST", "/api/v1/workspaces", map[string]any{"display_name": fmt.Sprintf("%s-%d", name, j)}); r.Status != 200 {
					t.Errorf("%s: create workspace: %d %s", name, r.Status, r.Body)
					return
				}
			}
			r := s.Do("POST", "/v2/deployments", map[string]any{"name": name, "source": "internal_source",
				"source_config": map[string]any{}, "source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}, "secrets": []any{}})
			if r.Status != 201 {
				t.Errorf("%s: create deployment: %d %s", name, r.Status, r.Body)
				return
			}
			deps := s.Do("GET", "/v2/deployments", nil).Map()["resources"].([]any)
			if len(deps) != 1 || deps[0].(map[string]any)["name"] != name {
				t.Errorf("%s sees deployments %v", name, deps)
			}
			wss, _ := s.Do("GET", "/api/v1/workspaces", nil).JSON().([]any)
			for _, w := range wss {
				if dn, _ := w.(map[string]any)["display_name"].(string); strings.HasPrefix(dn, "app-") && !strings.HasPrefix(dn, name+"-") {
					t.Errorf("%s sees another app's workspace %q", name, dn)
				}
			}
		}()
	}
	wg.Wait()
}
