package processtest_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"slipway/server/servertest"
)

// goldenDir holds a data directory written by an earlier version of
// Slipway (see its README): the database file, the master key its secrets
// and audit seals are keyed by, and manifest.json naming what is in it.
const goldenDir = "testdata/golden"

// goldenManifest is what the generator created, for the test to find again.
// The values are test data, not credentials of any real install.
type goldenManifest struct {
	AdminKey    string         `json:"admin_key"`     // the initial organization-admin key
	ServiceKey  string         `json:"service_key"`   // POST /api/v1/api-key
	ReadOnlyKey string         `json:"read_only_key"` // POST /api/v1/api-key {"read_only": true}
	PAT         string         `json:"pat"`           // a personal access token
	OrgID       string         `json:"org_id"`
	Workspace   string         `json:"workspace_id"` // the extra workspace
	Listener    string         `json:"listener_id"`
	Role        string         `json:"role_id"`
	User        goldenUser     `json:"basic_auth_user"`
	Deployments []goldenDeploy `json:"deployments"`
	WSSecrets   []string       `json:"workspace_secrets"` // names
	Events      int            `json:"audit_events"`      // in the organization's log when written
}

type goldenUser struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

type goldenDeploy struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	Source    string   `json:"source"`
	Revisions []string `json:"revisions"` // oldest first; the last is active
	Secrets   []string `json:"secrets"`   // names
	ImageURI  string   `json:"image_uri"` // of the active revision
}

// TestGoldenDatabase starts the current binary on a copy of a data
// directory written by an earlier version: it must open (migrating if
// needed), serve the deployments it holds with their fields, revisions and
// listener, accept the keys and passwords it issued, open the secrets it
// sealed, and keep its audit chain verifiable. A renamed bucket, a changed
// key layout or a changed JSON field shows up here as missing data.
func TestGoldenDatabase(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(goldenDir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m goldenManifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"slipway.db", "master.key"} {
		if err := os.WriteFile(filepath.Join(dir, name), readGolden(t, name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s := servertest.Start(t, map[string]string{"SLIPWAY_DATA_DIR": dir})
	s.Key = m.AdminKey
	as := func(key string) []string { return []string{"X-Api-Key", key} }

	t.Run("keys", func(t *testing.T) {
		for name, key := range map[string]string{"admin": m.AdminKey, "service": m.ServiceKey, "read-only": m.ReadOnlyKey, "pat": m.PAT} {
			if r := s.Do("GET", "/v2/deployments", nil, as(key)...); r.Status != 200 {
				t.Errorf("%s key: %d %s", name, r.Status, r.Body)
			}
		}
		if r := s.Do("POST", "/v2/listeners", map[string]any{"compute_type": "k8s", "compute_id": "ro",
			"compute_config": map[string]any{"k8s_namespaces": []any{"x"}}}, as(m.ReadOnlyKey)...); r.Status != 403 {
			t.Errorf("read-only key writing: %d %s", r.Status, r.Body)
		}
		if r := s.Do("GET", "/v2/deployments", nil, as("lsv2_sk_"+strings.Repeat("0", 40))...); r.Status != 401 {
			t.Errorf("unknown key: %d %s", r.Status, r.Body)
		}
		login := s.Do("POST", "/api/v1/login", map[string]any{"email": m.User.Email, "password": m.User.Password}, "X-Api-Key", "")
		if login.Status != 200 || login.Map()["access_token"] == nil {
			t.Errorf("basic-auth login: %d %s", login.Status, login.Body)
		}
		if r := s.Do("POST", "/api/v1/login", map[string]any{"email": m.User.Email, "password": "not-the-password"}, "X-Api-Key", ""); r.Status != 401 {
			t.Errorf("wrong password: %d %s", r.Status, r.Body)
		}
	})

	t.Run("organization", func(t *testing.T) {
		if id := s.Do("GET", "/api/v1/orgs/current/info", nil).Map()["id"]; id != m.OrgID {
			t.Errorf("organization %v, want %s", id, m.OrgID)
		}
		if !strings.Contains(string(s.Do("GET", "/api/v1/workspaces", nil).Body), m.Workspace) {
			t.Errorf("workspace %s missing", m.Workspace)
		}
		if !strings.Contains(string(s.Do("GET", "/api/v1/orgs/current/roles", nil).Body), m.Role) {
			t.Errorf("role %s missing", m.Role)
		}
		if !strings.Contains(string(s.Do("GET", "/api/v1/orgs/current/members", nil).Body), m.User.Email) {
			t.Errorf("member %s missing", m.User.Email)
		}
		secrets := string(s.Do("GET", "/api/v1/workspaces/current/secrets", nil).Body)
		for _, name := range m.WSSecrets {
			if !strings.Contains(secrets, name) {
				t.Errorf("workspace secret %s missing: %s", name, secrets)
			}
		}
		if r := s.Do("GET", "/v2/listeners/"+m.Listener, nil); r.Status != 200 || r.Map()["compute_id"] != "golden-cluster" {
			t.Errorf("listener: %d %s", r.Status, r.Body)
		}
	})

	t.Run("deployments", func(t *testing.T) {
		list := s.Do("GET", "/v2/deployments", nil).Map()
		res, _ := list["resources"].([]any)
		if len(res) != len(m.Deployments) {
			t.Fatalf("deployments: %s", s.Do("GET", "/v2/deployments", nil).Body)
		}
		for _, want := range m.Deployments {
			d := s.Do("GET", "/v2/deployments/"+want.ID, nil).Map()
			active := want.Revisions[len(want.Revisions)-1]
			if d["name"] != want.Name || d["source"] != want.Source || d["active_revision_id"] != active || d["latest_revision_id"] != active {
				t.Errorf("deployment %s: %v", want.Name, d)
			}
			if got := d["source_revision_config"].(map[string]any)["image_uri"]; got != want.ImageURI {
				t.Errorf("deployment %s image_uri %v, want %s", want.Name, got, want.ImageURI)
			}
			var names []string
			for _, sec := range d["secrets"].([]any) {
				sec := sec.(map[string]any)
				names = append(names, sec["name"].(string))
				if v, _ := sec["value"].(string); strings.Contains(v, "golden-secret") {
					t.Errorf("deployment %s returns a secret's value: %v", want.Name, sec)
				}
			}
			slices.Sort(names)
			if !slices.Equal(names, want.Secrets) {
				t.Errorf("deployment %s secrets %v, want %v", want.Name, names, want.Secrets)
			}
			revs := s.Do("GET", "/v2/deployments/"+want.ID+"/revisions", nil).Map()["resources"].([]any)
			var ids []string
			for _, r := range revs {
				ids = append([]string{r.(map[string]any)["id"].(string)}, ids...)
			}
			if !slices.Equal(ids, want.Revisions) {
				t.Errorf("deployment %s revisions %v, want %v", want.Name, ids, want.Revisions)
			}
			for _, rid := range want.Revisions {
				if st := s.Do("GET", "/v2/deployments/"+want.ID+"/revisions/"+rid, nil).Map()["status"]; st != "DEPLOYED" {
					t.Errorf("revision %s: %v", rid, st)
				}
			}
			if n := len(s.Do("GET", "/api/v1/sessions?name="+want.Name, nil).JSON().([]any)); n != 1 {
				t.Errorf("tracing project %s: %d", want.Name, n)
			}
		}
	})

	// The active revisions are restored after the start, which opens
	// their sealed secrets for the runtime: the log says so for each (a
	// deployment whose secrets do not open logs that it could not be
	// restored, and turns UNKNOWN).
	t.Run("secrets reach the runtime", func(t *testing.T) {
		for _, want := range m.Deployments {
			deadline := time.Now().Add(20 * time.Second)
			for !logged(s.Logs(), want.ID, "active revision restored") {
				if time.Now().After(deadline) || logged(s.Logs(), want.ID, "could not restore") {
					t.Fatalf("deployment %s was not restored\n%s", want.Name, s.Logs())
				}
				time.Sleep(20 * time.Millisecond)
			}
			if st := s.Do("GET", "/v2/deployments/"+want.ID, nil).Map()["status"]; st != "READY" {
				t.Fatalf("deployment %s is %v after its restore", want.Name, st)
			}
		}
		// A rollback to the first revision opens that revision's secrets.
		dep := m.Deployments[0]
		r := s.Do("POST", "/v2/deployments/"+dep.ID+"/revisions/"+dep.Revisions[0]+"/redeploy", nil)
		if r.Status != 200 {
			t.Fatalf("redeploy: %d %s", r.Status, r.Body)
		}
		servertest.WaitRevision(t, s, dep.ID, dep.Revisions[0], "DEPLOYED")
	})

	// Still served: a new revision of a golden deployment pointing at a
	// server of the test's own answers through the proxy.
	t.Run("serves", func(t *testing.T) {
		echo := servertest.HeaderEcho(t)
		dep := m.Deployments[1]
		r := s.Do("PATCH", "/v2/deployments/"+dep.ID, map[string]any{"source_revision_config": map[string]any{"image_uri": echo}})
		if r.Status != 200 {
			t.Fatalf("patch: %d %s", r.Status, r.Body)
		}
		servertest.WaitRevision(t, s, dep.ID, r.Map()["latest_revision_id"].(string), "DEPLOYED")
		if r := servertest.Do(t, "GET", s.URL+"/agents/"+dep.Name+"/ok", nil, as(m.AdminKey)...); r.Status != 200 {
			t.Fatalf("proxy: %d %s", r.Status, r.Body)
		}
	})

	t.Run("audit", func(t *testing.T) {
		r := s.Do("GET", "/api/v1/audit-logs?start_time=2000-01-01T00:00:00Z&end_time=2100-01-01T00:00:00Z&limit=100", nil, "X-Organization-Id", m.OrgID)
		items, _ := r.Map()["items"].([]any)
		if r.Status != 200 || len(items) < m.Events {
			t.Errorf("audit log: %d events (want at least %d): %d %.300s", len(items), m.Events, r.Status, r.Body)
		}
		out, err := goldenAdmin(t, dir, "audit", "verify")
		if err != nil || !strings.Contains(out, "intact") {
			t.Errorf("slipway admin audit verify: %v\n%s", err, out)
		}
	})
}

// logged reports whether one line of logs names both id and msg.
func logged(logs, id, msg string) bool {
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, id) && strings.Contains(line, msg) {
			return true
		}
	}
	return false
}

func goldenAdmin(t *testing.T, dataDir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(servertest.Binary(t), append([]string{"admin"}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "SLIPWAY_DATA_DIR=" + dataDir}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestGoldenDatabaseWrite makes the fixture TestGoldenDatabase reads. It
// runs only when SLIPWAY_GOLDEN_WRITE=1: the fixture is meant to stay as an
// earlier version wrote it, so it is regenerated only deliberately (and
// then from the version whose format it should pin).
func TestGoldenDatabaseWrite(t *testing.T) {
	if os.Getenv("SLIPWAY_GOLDEN_WRITE") != "1" {
		t.Skip("writes testdata/golden; set SLIPWAY_GOLDEN_WRITE=1 to regenerate it")
	}
	s := servertest.Start(t, nil)
	m := goldenManifest{AdminKey: s.Key}
	must := func(r *servertest.Response, what string) map[string]any {
		t.Helper()
		if r.Status/100 != 2 {
			t.Fatalf("%s: %d %s", what, r.Status, r.Body)
		}
		out, _ := r.JSON().(map[string]any)
		return out
	}
	m.OrgID = must(s.Do("GET", "/api/v1/orgs/current/info", nil), "org info")["id"].(string)
	if out, err := goldenAdmin(t, s.DataDir, "org", "set-flag", m.OrgID, "can_use_audit_logs", "true"); err != nil {
		t.Fatalf("enable audit logs: %v\n%s", err, out)
	}
	m.Workspace = must(s.Do("POST", "/api/v1/workspaces", map[string]any{"display_name": "Golden team"}), "workspace")["id"].(string)
	m.ServiceKey = must(s.Do("POST", "/api/v1/api-key", map[string]any{"description": "golden service key"}), "service key")["key"].(string)
	m.ReadOnlyKey = must(s.Do("POST", "/api/v1/api-key", map[string]any{"read_only": true}), "read-only key")["key"].(string)
	m.PAT = must(s.Do("POST", "/api/v1/orgs/current/personal-access-tokens", map[string]any{"description": "golden pat"}), "pat")["key"].(string)
	m.Role = must(s.Do("POST", "/api/v1/orgs/current/roles", map[string]any{"display_name": "Golden role", "description": "reads deployments",
		"permissions": []string{"deployments:read"}}), "role")["id"].(string)
	m.User = goldenUser{Email: "golden@example.com", Password: "golden-password-1"}
	must(s.Do("POST", "/api/v1/orgs/current/members/basic/batch", []any{map[string]any{"email": m.User.Email, "password": m.User.Password}}), "basic-auth user")
	must(s.Do("POST", "/api/v1/orgs/current/members", map[string]any{"email": "invited@example.com"}), "invite")
	m.WSSecrets = []string{"GOLDEN_WS_A", "GOLDEN_WS_B"}
	must(s.Do("POST", "/api/v1/workspaces/current/secrets", []any{map[string]any{"key": "GOLDEN_WS_A", "value": "golden-secret-ws-a"},
		map[string]any{"key": "GOLDEN_WS_B", "value": "golden-secret-ws-b"}}), "workspace secrets")
	m.Listener = must(s.Do("POST", "/v2/listeners", map[string]any{"compute_type": "k8s", "compute_id": "golden-cluster",
		"compute_config": map[string]any{"k8s_namespaces": []any{"agents"}}}), "listener")["id"].(string)

	for _, d := range []struct{ name, source string }{{"golden-one", "internal_docker"}, {"golden-two", "external_docker"}} {
		sourceConfig := map[string]any{}
		if d.source == "external_docker" {
			sourceConfig = map[string]any{"listener_id": m.Listener, "listener_config": map[string]any{"k8s_namespace": "agents"}}
		}
		gd := goldenDeploy{Name: d.name, Source: d.source, Secrets: []string{"API_TOKEN", "OPENAI_API_KEY"}}
		body := map[string]any{"name": d.name, "source": d.source, "source_config": sourceConfig,
			"source_revision_config": map[string]any{"image_uri": "registry.local/" + d.name + ":1"},
			"secrets": []any{map[string]any{"name": "OPENAI_API_KEY", "value": "golden-secret-openai-" + d.name},
				map[string]any{"name": "API_TOKEN", "value": "golden-secret-token-" + d.name}}}
		created := must(s.Do("POST", "/v2/deployments", body), "deployment "+d.name)
		gd.ID = created["id"].(string)
		gd.Revisions = append(gd.Revisions, created["latest_revision_id"].(string))
		servertest.WaitRevision(t, s, gd.ID, gd.Revisions[0], "DEPLOYED")
		gd.ImageURI = "registry.local/" + d.name + ":2"
		patched := must(s.Do("PATCH", "/v2/deployments/"+gd.ID, map[string]any{"source_revision_config": map[string]any{"image_uri": gd.ImageURI}}), "patch "+d.name)
		gd.Revisions = append(gd.Revisions, patched["latest_revision_id"].(string))
		servertest.WaitRevision(t, s, gd.ID, gd.Revisions[1], "DEPLOYED")
		deadline := time.Now().Add(20 * time.Second)
		for s.Do("GET", "/v2/deployments/"+gd.ID, nil).Map()["active_revision_id"] != gd.Revisions[1] {
			if time.Now().After(deadline) {
				t.Fatalf("%s: revision 2 never became active", d.name)
			}
			time.Sleep(20 * time.Millisecond)
		}
		m.Deployments = append(m.Deployments, gd)
	}
	r := s.Do("GET", "/api/v1/audit-logs?start_time=2000-01-01T00:00:00Z&end_time=2100-01-01T00:00:00Z&limit=100", nil, "X-Organization-Id", m.OrgID)
	m.Events = len(must(r, "audit log")["items"].([]any))
	if m.Events == 0 {
		t.Fatalf("no audit events: %s", r.Body)
	}
	s.Stop()

	data := filepath.Join(goldenDir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"slipway.db", "master.key"} {
		b, err := os.ReadFile(filepath.Join(s.DataDir, name))
		if err != nil {
			t.Fatal(err)
		}
		writeGolden(t, name, b)
	}
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(goldenDir, "manifest.json"), append(out, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The database is kept gzipped: bbolt preallocates its file, which is
// mostly zeros. Compressing keeps it byte for byte as it was written.
func readGolden(t *testing.T, name string) []byte {
	t.Helper()
	f, err := os.Open(filepath.Join(goldenDir, "data", name+".gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeGolden(t *testing.T, name string, b []byte) {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(goldenDir, "data", name+".gz"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
