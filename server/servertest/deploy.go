package servertest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// The deployment helpers that both the in-process suites (package server)
// and the process suites (package processtest) use.

// HeaderEcho starts an agent stand-in that answers with the headers it got
// and returns its URL; it stops when the test ends.
func HeaderEcho(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(r.Header)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// EchoDeployment creates an external_docker deployment whose agent (with
// the fake runtime) is the server at endpoint, waits until it serves and
// returns its id.
func EchoDeployment(t *testing.T, s *Server, name, endpoint string, sourceConfig map[string]any, headers ...string) string {
	t.Helper()
	if sourceConfig == nil {
		sourceConfig = map[string]any{}
	}
	d := s.Do("POST", "/v2/deployments", map[string]any{"name": name, "source": "external_docker",
		"source_config": sourceConfig, "source_revision_config": map[string]any{"image_uri": endpoint},
		"secrets": []any{}}, headers...)
	if d.Status != 201 {
		t.Fatalf("create %s: %d %s", name, d.Status, d.Body)
	}
	dep := d.Map()["id"].(string)
	WaitRevision(t, s, dep, d.Map()["latest_revision_id"].(string), "DEPLOYED")
	return dep
}

// WaitRevision waits up to a minute for revision rev of deployment dep to
// reach status want.
func WaitRevision(t *testing.T, s *Server, dep, rev, want string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		st := s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev, nil).Map()["status"]
		if st == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("revision %s never reached %s (last %v)", rev, want, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
