package server_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"slipway/server/admin"
	"slipway/server/apptest"
	"slipway/server/servertest"
)

// namedAgent is a deployment's agent that answers with its own name.
func namedAgent(t *testing.T, name string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, name)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// secondOrg creates an organization through the admin socket and returns
// its admin key and its default workspace id.
func secondOrg(t *testing.T, s *servertest.Server, name string) (key, ws string) {
	t.Helper()
	admin := func(args ...string) string {
		var out, errb bytes.Buffer
		if code := admin.Main(args, s.DataDir, &out, &errb); code != 0 {
			t.Fatalf("slipway admin %v: exit %d\n%s", args, code, errb.String())
		}
		return strings.TrimSpace(out.String())
	}
	org := admin("org", "create", "--name", name)
	key = admin("org", "create-admin-key", org)
	list := s.Do("GET", "/api/v1/workspaces", nil, "X-Api-Key", key)
	wss, _ := list.JSON().([]any)
	if len(wss) == 0 {
		t.Fatalf("workspaces of %s: %d %s", name, list.Status, list.Body)
	}
	return key, wss[0].(map[string]any)["id"].(string)
}

// byHostAs sends GET /ok with the given Host header and credentials.
func byHostAs(t *testing.T, s *servertest.Server, host string, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", s.URL+"/ok", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestCustomHostCannotBeTakenOver: a custom_url host belongs to one
// deployment across the install. Another organization's claim of the same
// host under any spelling (case, trailing dot, port) is a 409 on create and
// on PATCH, even from a deployment that fails to deploy, and routing stays
// with the first claim; the host is free again once its holder moves or is
// deleted.
func TestCustomHostCannotBeTakenOver(t *testing.T) {
	s := apptest.New(t, nil)
	keyB, wsB := secondOrg(t, s, "Other")
	asB := []string{"X-Api-Key", keyB, "X-Tenant-Id", wsB}
	ext := func(name, custom, image string) map[string]any {
		sc := map[string]any{}
		if custom != "" {
			sc["custom_url"] = custom
		}
		return map[string]any{"name": name, "source": "external_docker", "source_config": sc,
			"source_revision_config": map[string]any{"image_uri": image}, "secrets": []any{}}
	}

	depA := servertest.EchoDeployment(t, s, "agent-a", namedAgent(t, "agent A"), map[string]any{"custom_url": "https://agent-a.example.com"})
	if code, body := byHostAs(t, s, "agent-a.example.com", "X-Api-Key", s.Key); code != 200 || body != "agent A" {
		t.Fatalf("by host: %d %q", code, body)
	}

	for _, spelling := range []string{"https://AGENT-A.example.com.", "https://agent-a.example.com:443", "http://Agent-A.Example.Com:8080/x", "agent-a.example.com"} {
		r := s.Do("POST", "/v2/deployments", ext("takeover", spelling, "fail-deploy"), asB...)
		if r.Status != 409 || !strings.Contains(string(r.Body), "agent-a.example.com") {
			t.Fatalf("create with %q from another organization: %d %s", spelling, r.Status, r.Body)
		}
	}
	// The same organization cannot hold one host twice either.
	if r := s.Do("POST", "/v2/deployments", ext("twin", "https://agent-a.example.com", "img")); r.Status != 409 {
		t.Fatalf("second claim in the same workspace: %d %s", r.Status, r.Body)
	}
	// A failing deployment of the other organization cannot take it by PATCH.
	failing := s.Do("POST", "/v2/deployments", ext("failing", "https://b.example.com", "fail-deploy"), asB...)
	if failing.Status != 201 {
		t.Fatalf("create: %d %s", failing.Status, failing.Body)
	}
	depB := failing.Map()["id"].(string)
	revB := failing.Map()["latest_revision_id"].(string)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st := s.Do("GET", "/v2/deployments/"+depB+"/revisions/"+revB, nil, asB...).Map()["status"]
		if st == "DEPLOY_FAILED" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("revision %s: %v", revB, st)
		}
	}
	steal := map[string]any{"source_config": map[string]any{"custom_url": "https://AGENT-A.EXAMPLE.COM."}}
	if r := s.Do("PATCH", "/v2/deployments/"+depB, steal, asB...); r.Status != 409 || !strings.Contains(string(r.Body), `"detail"`) {
		t.Fatalf("patch to a taken host: %d %s", r.Status, r.Body)
	}
	if got := s.Do("GET", "/v2/deployments/"+depB, nil, asB...).Map()["source_config"].(map[string]any)["custom_url"]; got != "https://b.example.com" {
		t.Fatalf("a refused PATCH changed custom_url to %v", got)
	}
	for _, host := range []string{"agent-a.example.com", "AGENT-A.example.com.", "agent-a.example.com:8443"} {
		if code, body := byHostAs(t, s, host, "X-Api-Key", s.Key); code != 200 || body != "agent A" {
			t.Fatalf("host %s after the attempts: %d %q", host, code, body)
		}
		if code, body := byHostAs(t, s, host, asB...); code == 200 {
			t.Fatalf("host %s served the other organization's key: %q", host, body)
		}
	}

	// A moves to another host: the old one is free, and B may claim it.
	move := map[string]any{"source_config": map[string]any{"custom_url": "https://agent-a2.example.com"}}
	if r := s.Do("PATCH", "/v2/deployments/"+depA, move); r.Status != 200 {
		t.Fatalf("move: %d %s", r.Status, r.Body)
	}
	if r := s.Do("PATCH", "/v2/deployments/"+depB, steal, asB...); r.Status != 200 {
		t.Fatalf("claim a freed host: %d %s", r.Status, r.Body)
	}
	if r := s.Do("PATCH", "/v2/deployments/"+depA, map[string]any{"source_config": map[string]any{"custom_url": "https://agent-a.example.com"}}); r.Status != 409 {
		t.Fatalf("A claims its old host back from B: %d %s", r.Status, r.Body)
	}
	// Deleting B frees the host at once.
	if r := s.Do("DELETE", "/v2/deployments/"+depB, nil, asB...); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if r := s.Do("PATCH", "/v2/deployments/"+depA, map[string]any{"source_config": map[string]any{"custom_url": "https://agent-a.example.com"}}); r.Status != 200 {
		t.Fatalf("A claims the host a deleted deployment held: %d %s", r.Status, r.Body)
	}
	if r := s.Do("POST", "/v2/deployments", ext("nohost", "https://", "img")); r.Status != 422 {
		t.Fatalf("custom_url without a host: %d %s", r.Status, r.Body)
	}
}
