package dashboard_test

import (
	"strings"
	"testing"
	"time"

	"slipway/server/servertest"
)

// The browser tests' set-up: a signed-in Organization Admin, and a
// deployment made as the dashboard's New deployment makes it (create,
// upload the source archive, point a new revision at it).

// addOrgAdmin adds an Organization Admin who signs in with password.
func addOrgAdmin(t *testing.T, s *servertest.Server, email, password string) {
	t.Helper()
	roles := map[string]string{}
	for _, r := range s.Do("GET", "/api/v1/orgs/current/roles", nil).JSON().([]any) {
		roles[r.(map[string]any)["display_name"].(string)] = r.(map[string]any)["id"].(string)
	}
	if r := s.Do("POST", "/api/v1/orgs/current/members/basic/batch", []any{
		map[string]any{"email": email, "password": password, "role_id": roles["Organization Admin"]},
	}); r.Status != 200 {
		t.Fatalf("add the user: %d %s", r.Status, r.Body)
	}
}

// deployArchive creates the deployment name from a source archive and
// waits, up to limit, until its revision is DEPLOYED; it returns the
// deployment's id.
func deployArchive(t *testing.T, s *servertest.Server, name string, archive []byte, limit time.Duration) string {
	t.Helper()
	d := s.Do("POST", "/v2/deployments", map[string]any{"name": name, "source": "internal_source", "source_config": map[string]any{},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}, "secrets": []any{}})
	if d.Status != 201 {
		t.Fatalf("create: %d %s", d.Status, d.Body)
	}
	dep := d.Map()["id"].(string)
	up := s.Do("POST", "/v2/deployments/"+dep+"/upload-url", nil)
	if up.Status != 200 {
		t.Fatalf("upload-url: %d %s", up.Status, up.Body)
	}
	if r := servertest.Do(t, "PUT", up.Map()["upload_url"].(string), archive); r.Status != 200 {
		t.Fatalf("upload: %d %s", r.Status, r.Body)
	}
	// The uploaded archive becomes the deployment's source: a new revision.
	p := s.Do("PATCH", "/v2/deployments/"+dep, map[string]any{"source_revision_config": map[string]any{
		"source_tarball_path": up.Map()["object_path"], "graph_config_path": "langgraph.json"}})
	if p.Status != 200 {
		t.Fatalf("patch: %d %s", p.Status, p.Body)
	}
	rev := p.Map()["latest_revision_id"].(string)
	start := time.Now()
	for {
		st, _ := s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev, nil).Map()["status"].(string)
		if st == "DEPLOYED" {
			t.Logf("%s deployed in %s", name, time.Since(start).Round(time.Second))
			return dep
		}
		if strings.HasSuffix(st, "FAILED") || st == "SKIPPED" {
			t.Fatalf("revision %s of %s: %s\n%s", rev, name, st, tail(s.Logs(), 100))
		}
		if time.Since(start) > limit {
			t.Fatalf("revision %s of %s still %s after %s", rev, name, st, limit)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
