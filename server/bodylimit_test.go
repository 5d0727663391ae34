package server_test

import (
	"net/http"
	"strings"
	"testing"

	"slipway/server/apptest"
	"slipway/server/servertest"
)

// The API body cap itself (a 1 GiB body with each method, and the
// server's memory after it) is tested against a real process:
// server/processtest/bodylimit_test.go.

// TestUploadRouteKeepsItsOwnCap: the upload route is the one exemption; an
// archive over the default 1 MiB API cap but under SLIPWAY_MAX_UPLOAD_MB
// is read whole (the upload then fails on content, not on size).
func TestUploadRouteKeepsItsOwnCap(t *testing.T) {
	s := apptest.New(t, nil)
	d := s.Do("POST", "/v2/deployments", map[string]any{"name": "big-upload", "source": "internal_source",
		"source_config": map[string]any{}, "source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}, "secrets": []any{}})
	if d.Status != 201 {
		t.Fatalf("create: %d %s", d.Status, d.Body)
	}
	up := s.Do("POST", "/v2/deployments/"+d.Map()["id"].(string)+"/upload-url", nil)
	if up.Status != 200 {
		t.Fatalf("upload-url: %d %s", up.Status, up.Body)
	}
	r := servertest.Do(t, "PUT", up.Map()["upload_url"].(string), strings.Repeat("x", 3<<20))
	if r.Status == http.StatusRequestEntityTooLarge {
		t.Fatalf("a 3 MiB upload hit the API body limit: %s", r.Body)
	}
}
