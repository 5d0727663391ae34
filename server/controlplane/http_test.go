package controlplane_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"slipway/server/apptest"
	"slipway/server/servertest"
)

func dockerDeployment(name string) map[string]any {
	return map[string]any{
		"name": name, "source": "internal_docker",
		"source_config":          map[string]any{},
		"source_revision_config": map[string]any{"image_uri": "registry.local/agent:1"},
		"secrets":                []any{map[string]any{"name": "OPENAI_API_KEY", "value": "sk-super-secret-value"}},
	}
}

func mustStatus(t *testing.T, r *servertest.Response, want int) {
	t.Helper()
	if r.Status != want {
		t.Fatalf("status %d, want %d: %s", r.Status, want, r.Body)
	}
}

// waitRevision polls a revision until it reaches a terminal status, as the
// documented flow does.
func waitRevision(t *testing.T, s *servertest.Server, dep, rev string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		r := s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev, nil)
		mustStatus(t, r, 200)
		st := r.Map()["status"].(string)
		switch st {
		case "DEPLOYED", "BUILD_FAILED", "DEPLOY_FAILED", "CREATE_FAILED", "SKIPPED":
			return st
		}
		time.Sleep(30 * time.Millisecond)
	}
	t.Fatalf("revision %s never finished", rev)
	return ""
}

// assertOnlyRevision checks that the placeholder revision a POST made
// without a source is gone (404 in the reference's words) and that the
// deployment's only revision is rev.
func assertOnlyRevision(t *testing.T, s *servertest.Server, dep, placeholder, rev string) {
	t.Helper()
	r := s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+placeholder, nil)
	mustStatus(t, r, 404)
	revs := s.Do("GET", "/v2/deployments/"+dep+"/revisions", nil).Map()["resources"].([]any)
	if len(revs) != 1 || revs[0].(map[string]any)["id"] != rev {
		t.Fatalf("revisions after the first source: %v, want only %s", revs, rev)
	}
}

// TestRecommendedFlow drives the spec's documented flow end to end:
// create → get → poll the latest revision until DEPLOYED → PATCH → poll → DELETE.
func TestRecommendedFlow(t *testing.T) {
	s := apptest.New(t, nil)
	r := s.Do("POST", "/v2/deployments", dockerDeployment("flow-agent"))
	mustStatus(t, r, 201)
	d := r.Map()
	id, rev1 := d["id"].(string), d["latest_revision_id"].(string)
	if d["active_revision_id"] != nil || d["tenant_id"] == "" {
		t.Fatalf("new deployment: %v", d)
	}
	if sec := d["secrets"].([]any)[0].(map[string]any); sec["value"] == "sk-super-secret-value" {
		t.Fatal("secret value returned")
	}

	mustStatus(t, s.Do("GET", "/v2/deployments/"+id, nil), 200)
	if st := waitRevision(t, s, id, rev1); st != "DEPLOYED" {
		t.Fatalf("revision 1 ended %s", st)
	}
	d = s.Do("GET", "/v2/deployments/"+id, nil).Map()
	if d["active_revision_id"] != rev1 || d["status"] != "READY" {
		t.Fatalf("after deploy: %v", d)
	}

	// A change that is not in the trigger table makes no revision.
	r = s.Do("PATCH", "/v2/deployments/"+id, map[string]any{"secret_references": []any{}})
	mustStatus(t, r, 200)
	if r.Map()["latest_revision_id"] != rev1 {
		t.Fatal("PATCH without a trigger field created a revision")
	}
	// image_uri is a trigger.
	r = s.Do("PATCH", "/v2/deployments/"+id, map[string]any{"source_revision_config": map[string]any{"image_uri": "registry.local/agent:2"}})
	mustStatus(t, r, 200)
	rev2 := r.Map()["latest_revision_id"].(string)
	if rev2 == rev1 {
		t.Fatal("PATCH with image_uri made no revision")
	}
	if st := waitRevision(t, s, id, rev2); st != "DEPLOYED" {
		t.Fatalf("revision 2 ended %s", st)
	}
	d = s.Do("GET", "/v2/deployments/"+id, nil).Map()
	if d["active_revision_id"] != rev2 {
		t.Fatalf("active = %v, want %s", d["active_revision_id"], rev2)
	}

	// Revisions are listed newest first.
	list := s.Do("GET", "/v2/deployments/"+id+"/revisions", nil).Map()
	res := list["resources"].([]any)
	if len(res) != 2 || res[0].(map[string]any)["id"] != rev2 || list["offset"].(float64) != 2 {
		t.Fatalf("revisions: %v", list)
	}
	r = s.Do("GET", "/v2/deployments/"+id+"/revisions?limit=1", nil)
	if got := r.Map()["resources"].([]any); len(got) != 1 || got[0].(map[string]any)["id"] != rev2 {
		t.Fatalf("revisions?limit=1: %s", r.Body)
	}

	// Roll back to the first revision.
	r = s.Do("POST", "/v2/deployments/"+id+"/revisions/"+rev1+"/redeploy", nil)
	mustStatus(t, r, 200)
	if r.Map()["latest_revision_id"] != rev1 {
		t.Fatalf("redeploy: %s", r.Body)
	}
	if st := waitRevision(t, s, id, rev1); st != "DEPLOYED" {
		t.Fatalf("redeployed revision ended %s", st)
	}
	waitFor(t, func() bool { return s.Do("GET", "/v2/deployments/"+id, nil).Map()["active_revision_id"] == rev1 })
	mustStatus(t, s.Do("POST", "/v2/deployments/"+id+"/revisions/"+rev1+"/redeploy", nil), 400)

	r = s.Do("DELETE", "/v2/deployments/"+id, nil)
	mustStatus(t, r, 204)
	waitFor(t, func() bool { return s.Do("GET", "/v2/deployments/"+id, nil).Status == 404 })
	r = s.Do("GET", "/v2/deployments/"+id, nil)
	if r.Map()["detail"] != "Deployment ID "+id+" not found." {
		t.Fatalf("404 body: %s", r.Body)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition never held")
		}
		time.Sleep(30 * time.Millisecond)
	}
}

func TestFailedRevisionKeepsActive(t *testing.T) {
	s := apptest.New(t, nil)
	d := s.Do("POST", "/v2/deployments", dockerDeployment("keeps-active")).Map()
	id, rev1 := d["id"].(string), d["latest_revision_id"].(string)
	waitRevision(t, s, id, rev1)
	for _, tc := range []struct{ image, want string }{
		{"registry.local/fail-build:1", "BUILD_FAILED"},
		{"registry.local/fail-deploy:1", "DEPLOY_FAILED"},
	} {
		r := s.Do("PATCH", "/v2/deployments/"+id, map[string]any{"source_revision_config": map[string]any{"image_uri": tc.image}})
		mustStatus(t, r, 200)
		if st := waitRevision(t, s, id, r.Map()["latest_revision_id"].(string)); st != tc.want {
			t.Fatalf("%s: ended %s", tc.image, st)
		}
		if got := s.Do("GET", "/v2/deployments/"+id, nil).Map(); got["active_revision_id"] != rev1 || got["status"] != "READY" {
			t.Fatalf("after %s: %v", tc.want, got)
		}
	}
}

func TestSupersededRevisionIsSkipped(t *testing.T) {
	s := apptest.New(t, nil)
	d := s.Do("POST", "/v2/deployments", dockerDeployment("skips")).Map()
	id := d["id"].(string)
	var revs []string
	for i := 0; i < 3; i++ {
		r := s.Do("PATCH", "/v2/deployments/"+id, map[string]any{"source_revision_config": map[string]any{"image_uri": fmt.Sprintf("img:%d", i)}})
		mustStatus(t, r, 200)
		revs = append(revs, r.Map()["latest_revision_id"].(string))
	}
	if st := waitRevision(t, s, id, revs[2]); st != "DEPLOYED" {
		t.Fatalf("latest ended %s", st)
	}
	first := waitRevision(t, s, id, d["latest_revision_id"].(string))
	mid := waitRevision(t, s, id, revs[1])
	if mid != "SKIPPED" || first != "SKIPPED" && first != "DEPLOYED" {
		t.Fatalf("superseded revisions: first %s, middle %s", first, mid)
	}
}

func TestListDeploymentsPaginationAndFilters(t *testing.T) {
	s := apptest.New(t, nil)
	var ids []string
	for i := 0; i < 25; i++ {
		r := s.Do("POST", "/v2/deployments", dockerDeployment(fmt.Sprintf("page-%02d", i)))
		mustStatus(t, r, 201)
		ids = append(ids, r.Map()["id"].(string))
	}
	seen := map[string]bool{}
	offset := 0
	for pages := 0; ; pages++ {
		r := s.Do("GET", fmt.Sprintf("/v2/deployments?limit=10&offset=%d", offset), nil)
		mustStatus(t, r, 200)
		m := r.Map()
		res := m["resources"].([]any)
		for _, x := range res {
			id := x.(map[string]any)["id"].(string)
			if seen[id] {
				t.Fatalf("deployment %s listed twice", id)
			}
			seen[id] = true
		}
		if len(res) == 0 {
			break
		}
		offset = int(m["offset"].(float64))
		if pages > 5 {
			t.Fatal("paging never ended")
		}
	}
	if len(seen) != 25 {
		t.Fatalf("saw %d deployments, want 25", len(seen))
	}
	first := s.Do("GET", "/v2/deployments?limit=1", nil).Map()["resources"].([]any)[0].(map[string]any)
	if first["id"] != ids[24] {
		t.Fatal("list is not newest first")
	}
	if got := s.Do("GET", "/v2/deployments", nil).Map()["resources"].([]any); len(got) != 20 {
		t.Fatalf("default limit gave %d", len(got))
	}
	if got := s.Do("GET", "/v2/deployments?name_contains=PAGE-1", nil).Map()["resources"].([]any); len(got) != 10 {
		t.Fatalf("name_contains gave %d", len(got))
	}
	r := s.Do("GET", "/v2/deployments?deployment_ids="+ids[3]+","+ids[7], nil)
	if got := r.Map()["resources"].([]any); len(got) != 2 {
		t.Fatalf("deployment_ids gave %d", len(got))
	}
	if got := s.Do("GET", "/v2/deployments?status=AWAITING_DELETE", nil).Map()["resources"].([]any); len(got) != 0 {
		t.Fatalf("status filter gave %d", len(got))
	}
	// Slipway's cursor: next_cursor walks the same newest-first order,
	// with a filter too, and is null after the last page.
	for _, filter := range []string{"", "&name_contains=PAGE-1"} {
		var walked []string
		cursor := ""
		for pages := 0; ; pages++ {
			r := s.Do("GET", "/v2/deployments?limit=4"+filter+cursor, nil)
			mustStatus(t, r, 200)
			for _, x := range r.Map()["resources"].([]any) {
				walked = append(walked, x.(map[string]any)["id"].(string))
			}
			next, _ := r.Map()["next_cursor"].(string)
			if next == "" {
				break
			}
			cursor = "&cursor=" + next
			if pages > 10 {
				t.Fatal("cursor paging never ended")
			}
		}
		var want []string
		for i := len(ids) - 1; i >= 0; i-- {
			if filter == "" || i >= 10 && i < 20 {
				want = append(want, ids[i])
			}
		}
		if fmt.Sprint(walked) != fmt.Sprint(want) {
			t.Fatalf("cursor paging%s gave %v, want %v", filter, walked, want)
		}
	}
	last := s.Do("GET", "/v2/deployments?limit=25", nil).Map()
	if last["next_cursor"] != nil {
		t.Fatalf("a page holding every deployment has next_cursor %v", last["next_cursor"])
	}
	for _, tc := range []struct{ query, loc, typ string }{
		{"limit=0", "limit", "greater_than_equal"},
		{"limit=101", "limit", "less_than_equal"},
		{"limit=x", "limit", "int_parsing"},
		{"offset=-1", "offset", "greater_than_equal"},
		{"status=NOPE", "status", "enum"},
		{"deployment_ids=nope", "deployment_ids", "uuid_parsing"},
		{"cursor=not-a-cursor", "cursor", "value_error"},
		{"cursor=AZrzy4TxdMmnr0rFd8AYkw&offset=3", "offset", "value_error"},
	} {
		r := s.Do("GET", "/v2/deployments?"+tc.query, nil)
		assertLoc(t, r, []any{"query", tc.loc}, tc.typ)
	}
}

func assertLoc(t *testing.T, r *servertest.Response, loc []any, typ string) {
	t.Helper()
	if r.Status != 422 {
		t.Fatalf("status %d, want 422: %s", r.Status, r.Body)
	}
	det, _ := r.Map()["detail"].([]any)
	if len(det) == 0 {
		t.Fatalf("no detail: %s", r.Body)
	}
	for _, d := range det {
		e := d.(map[string]any)
		if fmt.Sprint(e["loc"]) == fmt.Sprint(loc) && e["type"] == typ && e["msg"] != "" {
			return
		}
	}
	t.Fatalf("no error at %v of type %s: %s", loc, typ, r.Body)
}

func TestGetDeploymentErrors(t *testing.T) {
	s := apptest.New(t, nil)
	assertLoc(t, s.Do("GET", "/v2/deployments/not-a-uuid", nil), []any{"path", "deployment_id"}, "uuid_parsing")
	id := "0190f0f0-0000-7000-8000-000000000000"
	r := s.Do("GET", "/v2/deployments/"+id, nil)
	mustStatus(t, r, 404)
	if r.Map()["detail"] != "Deployment ID "+id+" not found." {
		t.Fatalf("body %s", r.Body)
	}
	for _, m := range []string{"PATCH", "DELETE"} {
		mustStatus(t, s.Do(m, "/v2/deployments/"+id, map[string]any{}), 404)
	}
	mustStatus(t, s.Do("GET", "/v2/deployments/"+id+"/revisions", nil), 404)
	mustStatus(t, s.Do("GET", "/v2/deployments/"+id+"/revisions/"+id, nil), 404)
	assertLoc(t, s.Do("GET", "/v2/deployments/"+id+"/revisions/xyz", nil), []any{"path", "revision_id"}, "uuid_parsing")
}

func TestDuplicateNameConflicts(t *testing.T) {
	s := apptest.New(t, nil)
	mustStatus(t, s.Do("POST", "/v2/deployments", dockerDeployment("twin")), 201)
	r := s.Do("POST", "/v2/deployments", dockerDeployment("twin"))
	mustStatus(t, r, 409)
	if _, ok := r.Map()["detail"].(string); !ok {
		t.Fatalf("409 body %s", r.Body)
	}
}

func TestAPIHostPrefix(t *testing.T) {
	s := apptest.New(t, nil)
	r := s.Do("POST", "/api-host/v2/deployments", dockerDeployment("prefixed"))
	mustStatus(t, r, 201)
	mustStatus(t, s.Do("GET", "/api-host/v2/deployments/"+r.Map()["id"].(string), nil), 200)
}

func tarGz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestSourceUploadFlow follows the official deploy client: create, ask for
// an upload URL, PUT the archive without credentials, PATCH the object path.
func TestSourceUploadFlow(t *testing.T) {
	s := apptest.New(t, map[string]string{"SLIPWAY_MAX_UPLOAD_MB": "1"})
	r := s.Do("POST", "/v2/deployments", map[string]any{
		"name": "src-agent", "source": "internal_source", "source_config": map[string]any{},
		"source_revision_config": map[string]any{"langgraph_config_path": "langgraph.json"}, "secrets": []any{},
	})
	mustStatus(t, r, 201)
	d := r.Map()
	id := d["id"].(string)
	if d["source_revision_config"].(map[string]any)["graph_config_path"] != "langgraph.json" {
		t.Fatalf("alias not mapped: %s", r.Body)
	}
	patch := func(path string) *servertest.Response {
		return s.Do("PATCH", "/v2/deployments/"+id, map[string]any{
			"revision_source":        "internal_source",
			"source_revision_config": map[string]any{"source_tarball_path": path, "langgraph_config_path": "langgraph.json"},
		})
	}
	loc := []any{"body", "source_revision_config", "source_tarball_path"}
	assertLoc(t, patch("uploads/"+id+"/0190f0f0-0000-7000-8000-000000000000.tar.gz"), loc, "value_error")

	for _, path := range []string{"/v2/deployments/" + id + "/upload-url", "/deployments/" + id + "/upload-url"} {
		r = s.Do("POST", path, nil)
		mustStatus(t, r, 200)
	}
	up := r.Map()
	uploadURL, objectPath := up["upload_url"].(string), up["object_path"].(string)
	// Issued but not uploaded: still refused.
	assertLoc(t, patch(objectPath), loc, "value_error")

	put := func(url string, body []byte) *servertest.Response {
		return servertest.Do(t, "PUT", url, body, "Content-Type", "application/gzip")
	}
	mustStatus(t, put(uploadURL+"x", tarGz(t, map[string]string{"a": "b"})), 403)
	mustStatus(t, put(uploadURL, []byte("not a tarball")), 400)
	mustStatus(t, put(uploadURL, bytes.Repeat([]byte{0}, 2<<20)), 413)
	archive := tarGz(t, map[string]string{"langgraph.json": `{"graphs":{"agent":{"builtin":"echo"}}}`})
	r = put(uploadURL, archive)
	mustStatus(t, r, 200)
	mustStatus(t, put(uploadURL, archive), 403) // single use

	r = patch(objectPath)
	mustStatus(t, r, 200)
	rev := r.Map()["latest_revision_id"].(string)
	if rev == d["latest_revision_id"] {
		t.Fatal("source_tarball_path made no revision")
	}
	if st := waitRevision(t, s, id, rev); st != "DEPLOYED" {
		t.Fatalf("source revision ended %s", st)
	}
	// The first revision only waited for a source: the revision that
	// brought one replaced it, so no SKIPPED placeholder is left beside it.
	assertOnlyRevision(t, s, id, d["latest_revision_id"].(string), rev)

	// An upload URL of another deployment is not accepted here.
	other := s.Do("POST", "/v2/deployments", map[string]any{
		"name": "src-other", "source": "internal_source", "source_config": map[string]any{},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}, "secrets": []any{},
	}).Map()["id"].(string)
	assertLoc(t, s.Do("PATCH", "/v2/deployments/"+other, map[string]any{
		"source_revision_config": map[string]any{"source_tarball_path": objectPath},
	}), loc, "value_error")
}

func TestTracingProjectFollowsDeployment(t *testing.T) {
	s := apptest.New(t, nil)
	count := func(name string) int { return len(s.Do("GET", "/api/v1/sessions?name="+name, nil).JSON().([]any)) }
	keep := s.Do("POST", "/v2/deployments", dockerDeployment("traced-keep")).Map()["id"].(string)
	drop := s.Do("POST", "/v2/deployments", dockerDeployment("traced-drop")).Map()["id"].(string)
	if count("traced-keep") != 1 || count("traced-drop") != 1 {
		t.Fatal("tracing projects not created")
	}
	mustStatus(t, s.Do("DELETE", "/v2/deployments/"+keep, nil), 204)
	mustStatus(t, s.Do("DELETE", "/v2/deployments/"+drop+"?delete_tracing_project=true", nil), 204)
	waitFor(t, func() bool { return s.Do("GET", "/v2/deployments/"+drop, nil).Status == 404 })
	waitFor(t, func() bool { return s.Do("GET", "/v2/deployments/"+keep, nil).Status == 404 })
	if count("traced-keep") != 1 || count("traced-drop") != 0 {
		t.Fatalf("after delete: keep %d, drop %d", count("traced-keep"), count("traced-drop"))
	}
	assertLoc(t, s.Do("DELETE", "/v2/deployments/"+keep+"?delete_tracing_project=maybe", nil), []any{"query", "delete_tracing_project"}, "bool_parsing")
}

func TestListeners(t *testing.T) {
	s := apptest.New(t, nil)
	body := map[string]any{"compute_type": "k8s", "compute_id": "cluster-a", "compute_config": map[string]any{"k8s_namespaces": []any{"agents"}}}
	r := s.Do("POST", "/v2/listeners", body)
	mustStatus(t, r, 201)
	id := r.Map()["id"].(string)
	mustStatus(t, s.Do("POST", "/v2/listeners", body), 409)
	mustStatus(t, s.Do("GET", "/v2/listeners/"+id, nil), 200)
	if got := s.Do("GET", "/v2/listeners", nil).Map()["resources"].([]any); len(got) != 1 {
		t.Fatalf("list: %v", got)
	}
	r = s.Do("PATCH", "/v2/listeners/"+id, map[string]any{"compute_config": map[string]any{"k8s_namespaces": []any{"a", "b"}}})
	mustStatus(t, r, 200)
	if ns := r.Map()["compute_config"].(map[string]any)["k8s_namespaces"].([]any); len(ns) != 2 {
		t.Fatalf("patch: %s", r.Body)
	}
	r = s.Do("PATCH", "/v2/listeners/"+id, map[string]any{"compute_id": "cluster-b"})
	if r.Status != 422 {
		t.Fatalf("compute_id change: %d %s", r.Status, r.Body)
	}
	mustStatus(t, s.Do("DELETE", "/v2/listeners/"+id, nil), 204)
	mustStatus(t, s.Do("GET", "/v2/listeners/"+id, nil), 404)
	assertLoc(t, s.Do("GET", "/v2/listeners/zzz", nil), []any{"path", "listener_id"}, "uuid_parsing")
}

func TestGithubIntegrations(t *testing.T) {
	s := apptest.New(t, nil)
	r := s.Do("GET", "/v1/integrations/github/install", nil)
	mustStatus(t, r, 200)
	if strings.TrimSpace(string(r.Body)) != "[]" {
		t.Fatalf("body %s", r.Body)
	}
	r = s.Do("POST", "/v2/deployments", map[string]any{"name": "gh", "source": "github", "source_config": map[string]any{},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json", "repo_ref": "main"}, "secrets": []any{}})
	if r.Status != 422 || !strings.Contains(string(r.Body), "internal_source") {
		t.Fatalf("github source: %d %s", r.Status, r.Body)
	}
}

func TestMalformedBodies(t *testing.T) {
	s := apptest.New(t, nil)
	cases := []struct {
		name string
		body string
		code int
	}{
		{"syntax", `{"name":`, 422},
		{"not an object", `[1,2]`, 422},
		{"empty", ``, 422},
		{"wrong type", `{"name": 5, "source": "internal_docker", "source_config": {}, "source_revision_config": {}, "secrets": []}`, 422},
		{"trailing data", `{} {}`, 422},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := s.Do("POST", "/v2/deployments", tc.body)
			if r.Status != tc.code {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.code, r.Body)
			}
		})
	}
	r := s.Do("POST", "/v2/deployments", strings.Repeat(" ", 2<<20)+"{}")
	if r.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized body: %d", r.Status)
	}
	if got := s.Do("GET", "/v2/deployments", nil); got.Status != 200 {
		t.Fatal("server unhealthy after bad input")
	}
}

func decode(resp *http.Response) map[string]any {
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return m
}

// TestOfficialDeployClientFlow replays the calls of the official deploy
// client for an image: look up by name, create with an empty
// source_revision_config, PATCH with revision_source and image_uri, take the
// newest revision, poll it.
func TestOfficialDeployClientFlow(t *testing.T) {
	s := apptest.New(t, nil)
	r := s.Do("GET", "/v2/deployments?name_contains=client-agent", nil, "X-Tenant-ID", "")
	mustStatus(t, r, 200)
	r = s.Do("POST", "/v2/deployments", map[string]any{"name": "client-agent", "source": "internal_docker",
		"source_config": map[string]any{"deployment_type": "dev"}, "source_revision_config": map[string]any{}, "secrets": []any{}})
	mustStatus(t, r, 201)
	id, first := r.Map()["id"].(string), r.Map()["latest_revision_id"].(string)
	r = s.Do("PATCH", "/v2/deployments/"+id, map[string]any{"revision_source": "internal_docker",
		"source_revision_config": map[string]any{"image_uri": "registry.local/agent:7"}})
	mustStatus(t, r, 200)
	revs := s.Do("GET", "/v2/deployments/"+id+"/revisions?limit=1", nil).Map()["resources"].([]any)
	rid := revs[0].(map[string]any)["id"].(string)
	if rid != r.Map()["latest_revision_id"] {
		t.Fatalf("revisions?limit=1 gave %s, latest is %v", rid, r.Map()["latest_revision_id"])
	}
	if st := waitRevision(t, s, id, rid); st != "DEPLOYED" {
		t.Fatalf("ended %s", st)
	}
	assertOnlyRevision(t, s, id, first, rid)
	mustStatus(t, s.Do("PATCH", "/v2/deployments/"+id, map[string]any{"revision_source": "internal_source"}), 422)
}

func TestListenerReference(t *testing.T) {
	s := apptest.New(t, nil)
	body := func(listener string) map[string]any {
		return map[string]any{"name": "ext-" + listener[:4], "source": "external_docker",
			"source_config":          map[string]any{"listener_id": listener, "listener_config": map[string]any{"k8s_namespace": "agents"}},
			"source_revision_config": map[string]any{"image_uri": "img:1"}, "secrets": []any{}}
	}
	assertLoc(t, s.Do("POST", "/v2/deployments", body("0190f0f0-0000-7000-8000-000000000000")), []any{"body", "source_config", "listener_id"}, "value_error")
	l := s.Do("POST", "/v2/listeners", map[string]any{"compute_type": "k8s", "compute_id": "c1", "compute_config": map[string]any{"k8s_namespaces": []any{"agents"}}})
	mustStatus(t, l, 201)
	lid := l.Map()["id"].(string)
	mustStatus(t, s.Do("POST", "/v2/deployments", body(lid)), 201)
	// A listener in use cannot be deleted.
	mustStatus(t, s.Do("DELETE", "/v2/listeners/"+lid, nil), 400)
}

// TestRevisionLogs reads build and deploy logs the way the official deploy
// client does, and follows them as a person tailing a deploy would.
func TestRevisionLogs(t *testing.T) {
	s := apptest.New(t, nil)
	d := s.Do("POST", "/v2/deployments", dockerDeployment("logged")).Map()
	id, rev := d["id"].(string), d["latest_revision_id"].(string)
	if st := waitRevision(t, s, id, rev); st != "DEPLOYED" {
		t.Fatalf("ended %s", st)
	}
	logs := func(phase string, body any) map[string]any {
		r := s.Do("POST", "/v1/projects/"+id+"/revisions/"+rev+"/"+phase, body)
		mustStatus(t, r, 200)
		return r.Map()
	}
	build := logs("build_logs", map[string]any{"limit": 100, "order": "asc"})
	if !strings.Contains(fmt.Sprint(build["logs"]), "fake build") || strings.Contains(fmt.Sprint(build["logs"]), "fake deploy") {
		t.Fatalf("build logs: %v", build["logs"])
	}
	deploy := logs("deploy_logs", map[string]any{})
	if !strings.Contains(fmt.Sprint(deploy["logs"]), "fake deploy") {
		t.Fatalf("deploy logs: %v", deploy["logs"])
	}
	// Paging: one entry at a time until next_offset is null.
	n, offset := 0, any(nil)
	for i := 0; i < 20; i++ {
		page := logs("deploy_logs", map[string]any{"limit": 1, "offset": offset})
		n += len(page["logs"].([]any))
		if page["next_offset"] == nil {
			break
		}
		offset = page["next_offset"]
	}
	if n != len(deploy["logs"].([]any)) {
		t.Fatalf("paged %d entries, want %d", n, len(deploy["logs"].([]any)))
	}
	if got := logs("deploy_logs", map[string]any{"query": "healthy"})["logs"].([]any); len(got) != 1 {
		t.Fatalf("query filter: %v", got)
	}
	mustStatus(t, s.Do("POST", "/v1/projects/"+id+"/revisions/"+rev+"/build_logs", map[string]any{"order": "sideways"}), 422)
	// A read-only key may read logs.
	ro := s.Do("POST", "/api/v1/api-key", map[string]any{"read_only": true}).Map()["key"].(string)
	mustStatus(t, s.Do("POST", "/v1/projects/"+id+"/revisions/"+rev+"/build_logs", map[string]any{}, "X-Api-Key", ro), 200)
	// follow=true streams and ends with the revision.
	r := s.Do("GET", "/v2/deployments/"+id+"/revisions/"+rev+"/logs?follow=true", nil)
	if r.Status != 200 || !strings.Contains(string(r.Body), "event: log") || !strings.Contains(string(r.Body), `event: end`) {
		t.Fatalf("follow: %d %s", r.Status, r.Body)
	}
	// A failed build says why.
	p := s.Do("PATCH", "/v2/deployments/"+id, map[string]any{"source_revision_config": map[string]any{"image_uri": "registry.local/fail-build:1"}})
	bad := p.Map()["latest_revision_id"].(string)
	waitRevision(t, s, id, bad)
	r = s.Do("POST", "/v1/projects/"+id+"/revisions/"+bad+"/build_logs", map[string]any{"level": "error"})
	if !strings.Contains(string(r.Body), "build failed") {
		t.Fatalf("failed build logs: %s", r.Body)
	}
}

// TestRevisionListTellsWhichServes rolls back and checks that the revision
// list and each revision say which one serves: after the rollback both
// read DEPLOYED (the spec has no superseded status), and is_active is true
// for exactly the deployment's active_revision_id.
func TestRevisionListTellsWhichServes(t *testing.T) {
	s := apptest.New(t, nil)
	d := s.Do("POST", "/v2/deployments", dockerDeployment("rolled-back")).Map()
	id, rev1 := d["id"].(string), d["latest_revision_id"].(string)
	if st := waitRevision(t, s, id, rev1); st != "DEPLOYED" {
		t.Fatalf("revision 1 ended %s", st)
	}
	rev2 := s.Do("PATCH", "/v2/deployments/"+id, map[string]any{"source_revision_config": map[string]any{"image_uri": "registry.local/agent:2"}}).Map()["latest_revision_id"].(string)
	if st := waitRevision(t, s, id, rev2); st != "DEPLOYED" {
		t.Fatalf("revision 2 ended %s", st)
	}
	mustStatus(t, s.Do("POST", "/v2/deployments/"+id+"/revisions/"+rev1+"/redeploy", nil), 200)
	if st := waitRevision(t, s, id, rev1); st != "DEPLOYED" {
		t.Fatalf("rollback ended %s", st)
	}
	if a := s.Do("GET", "/v2/deployments/"+id, nil).Map()["active_revision_id"]; a != rev1 {
		t.Fatalf("active revision %v, want %s", a, rev1)
	}
	cases := []struct {
		rev    string
		active bool
	}{{rev1, true}, {rev2, false}}
	list := s.Do("GET", "/v2/deployments/"+id+"/revisions", nil).Map()["resources"].([]any)
	for _, tc := range cases {
		got := s.Do("GET", "/v2/deployments/"+id+"/revisions/"+tc.rev, nil).Map()
		if got["status"] != "DEPLOYED" || got["is_active"] != tc.active {
			t.Fatalf("revision %s: status %v is_active %v, want DEPLOYED %v", tc.rev, got["status"], got["is_active"], tc.active)
		}
		found := false
		for _, r := range list {
			if r := r.(map[string]any); r["id"] == tc.rev {
				found = true
				if r["is_active"] != tc.active {
					t.Fatalf("listed revision %s: is_active %v, want %v", tc.rev, r["is_active"], tc.active)
				}
			}
		}
		if !found {
			t.Fatalf("revision %s not listed", tc.rev)
		}
	}
}
