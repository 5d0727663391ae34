package orgapi_test

import (
	"bytes"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/server/admin"
	"slipway/server/apptest"
	"slipway/server/audit"
	"slipway/server/servertest"
	"slipway/storage"
)

// seedOldEvents appends create_deployment events of org at the given ages
// (oldest first, since an organization's chain never goes back in time)
// straight into the stopped server's database, chained under the key the
// server derives from its master key.
func seedOldEvents(t *testing.T, dataDir string, master []byte, org uuid.UUID, ages ...time.Duration) {
	t.Helper()
	db, err := storage.Open(filepath.Join(dataDir, "slipway.db"), time.Second, storage.ControlPlaneMigrations)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sealer, err := storage.NewSealer(master)
	if err != nil {
		t.Fatal(err)
	}
	var now time.Time
	l := &audit.Log{Key: sealer.Key("slipway audit chain v1"), Version: "test", Now: func() time.Time { return now }}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, age := range ages {
			now = time.Now().Add(-age)
			err := l.Append(tx, audit.Entry{Op: "create_deployment", OK: true,
				Actor:     audit.Actor{OrgID: org.String(), UserID: uuid.NewString()},
				Request:   audit.Request{Method: "POST", Path: "/v2/deployments", ClientIP: "127.0.0.1", Status: 201},
				Resources: []audit.Resource{{UID: age.String(), Type: "deployment"}}})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// auditAges returns the resource uids (the seeded ages) of the
// create_deployment events the organization can still read.
func auditAges(t *testing.T, s *servertest.Server) []string {
	t.Helper()
	r := s.Do("GET", "/api/v1/audit-logs?limit=100&operations=create_deployment&start_time=2000-01-01T00:00:00Z&end_time="+
		url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339)), nil)
	mustStatus(t, r, 200)
	var out []string
	for _, it := range r.Map()["items"].([]any) {
		for _, res := range it.(map[string]any)["resources"].([]any) {
			out = append(out, res.(map[string]any)["uid"].(string))
		}
	}
	return out
}

// eventuallyAges waits for the retention run a start begins (it runs beside
// the server, not before it answers) to leave exactly want.
func eventuallyAges(t *testing.T, s *servertest.Server, what string, want ...time.Duration) {
	t.Helper()
	var ws []string
	for _, d := range want {
		ws = append(ws, d.String())
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := strings.Join(auditAges(t, s), ",")
		if got == strings.Join(ws, ",") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: events %s, want %s", what, got, strings.Join(ws, ","))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func verifyChain(t *testing.T, dataDir string) string {
	t.Helper()
	var out bytes.Buffer
	if code := admin.Main([]string{"audit", "verify"}, dataDir, &out, &out); code != 0 {
		t.Fatalf("slipway admin audit verify: exit %d\n%s", code, out.String())
	}
	return out.String()
}

// TestAuditRetentionOverHTTP checks retention against a real server: the
// 400-day default, a shorter per-organization retention set with PUT
// /api/v1/orgs/ttl-settings, validation of that setting, and a chain that
// still verifies after each pruning. The job runs at start-up and then
// hourly; restarts stand in for the hours.
func TestAuditRetentionOverHTTP(t *testing.T) {
	dir := t.TempDir()
	master := bytes.Repeat([]byte{7}, 32)
	if err := os.WriteFile(filepath.Join(dir, "master.key"), []byte(hex.EncodeToString(master)), 0o600); err != nil {
		t.Fatal(err)
	}
	s := apptest.New(t, map[string]string{"SLIPWAY_DATA_DIR": dir, "DEFAULT_ORG_FEATURE_CAN_USE_AUDIT_LOGS": "true"})
	members := s.Do("GET", "/api/v1/orgs/current/members", nil)
	mustStatus(t, members, 200)
	org := uuid.MustParse(members.Map()["organization_id"].(string))
	s.Stop()

	day := 24 * time.Hour
	seedOldEvents(t, dir, master, org, 500*day, 401*day, 300*day, 10*day)
	s.Restart()
	// The start-up run prunes what the 400-day default does not keep.
	eventuallyAges(t, s, "after the default retention", 300*day, 10*day)
	if out := verifyChain(t, dir); !strings.Contains(out, "intact") {
		t.Fatalf("verify after default pruning: %s", out)
	}

	// The setting and its validation.
	mustStatus(t, s.Do("PUT", "/api/v1/orgs/ttl-settings", map[string]any{"default_trace_tier": "longlived", "audit_log_retention_days": 30}, "X-Api-Key", ""), 401)
	bad := []struct {
		body map[string]any
		loc  string
		typ  string
	}{
		{map[string]any{"audit_log_retention_days": 30}, "default_trace_tier", "missing"},
		{map[string]any{"default_trace_tier": "forever"}, "default_trace_tier", "enum"},
		{map[string]any{"default_trace_tier": "longlived", "audit_log_retention_days": 0}, "audit_log_retention_days", "greater_than_equal"},
		{map[string]any{"default_trace_tier": "longlived", "audit_log_retention_days": 401}, "audit_log_retention_days", "less_than_equal"},
		{map[string]any{"default_trace_tier": "longlived", "audit_log_retention_days": "thirty"}, "audit_log_retention_days", "int_type"},
		{map[string]any{"default_trace_tier": "longlived", "audit_log_retention_days": 30, "tenant_id": uuid.NewString()}, "audit_log_retention_days", "value_error"},
		{map[string]any{"default_trace_tier": "longlived", "tenant_id": uuid.NewString()}, "tenant_id", "value_error"},
		{map[string]any{"default_trace_tier": "longlived", "retention": 3}, "retention", "extra_forbidden"},
	}
	for _, tc := range bad {
		r := s.Do("PUT", "/api/v1/orgs/ttl-settings", tc.body)
		assertValidation(t, r, []any{"body", tc.loc}, tc.typ)
	}
	r := s.Do("PUT", "/api/v1/orgs/ttl-settings", map[string]any{"default_trace_tier": "longlived", "audit_log_retention_days": 30})
	mustStatus(t, r, 200)
	if d := r.Map()["audit_log_retention_days"]; d != float64(30) {
		t.Fatalf("ttl settings answer %s", r.Body)
	}
	list := s.Do("GET", "/api/v1/orgs/ttl-settings", nil)
	mustStatus(t, list, 200)
	if items := list.JSON().([]any); len(items) != 1 || items[0].(map[string]any)["audit_log_retention_days"] != float64(30) {
		t.Fatalf("ttl settings list %s", list.Body)
	}
	// Only organization:manage may change it: a workspace-scoped key may not.
	wsKey := s.Do("POST", "/api/v1/api-key", map[string]any{}).Map()["key"].(string)
	mustStatus(t, s.Do("PUT", "/api/v1/orgs/ttl-settings", map[string]any{"default_trace_tier": "longlived", "audit_log_retention_days": 1}, "X-Api-Key", wsKey), 403)

	// The next run keeps 30 days only; the chain still verifies.
	s.Restart()
	eventuallyAges(t, s, "after a 30-day retention", 10*day)
	if out := verifyChain(t, dir); !strings.Contains(out, "intact") {
		t.Fatalf("verify after per-organization pruning: %s", out)
	}
	// Back to the default (null): nothing more is pruned.
	mustStatus(t, s.Do("PUT", "/api/v1/orgs/ttl-settings", map[string]any{"default_trace_tier": "shortlived", "audit_log_retention_days": nil}), 200)
	s.Restart()
	time.Sleep(200 * time.Millisecond) // give a (wrong) pruning run the time to happen
	eventuallyAges(t, s, "after restoring the default", 10*day)
}

// assertValidation checks a 422 HTTPValidationError with one entry at loc of type typ.
func assertValidation(t *testing.T, r *servertest.Response, loc []any, typ string) {
	t.Helper()
	if r.Status != 422 {
		t.Fatalf("status %d, want 422 at %v: %s", r.Status, loc, r.Body)
	}
	d, ok := r.Map()["detail"].([]any)
	if !ok || len(d) == 0 {
		t.Fatalf("no validation detail: %s", r.Body)
	}
	e := d[0].(map[string]any)
	gotLoc := e["loc"].([]any)
	if len(gotLoc) != len(loc) {
		t.Fatalf("loc %v, want %v: %s", gotLoc, loc, r.Body)
	}
	for i := range loc {
		want := loc[i]
		if n, isInt := want.(int); isInt {
			want = float64(n)
		}
		if gotLoc[i] != want {
			t.Fatalf("loc %v, want %v: %s", gotLoc, loc, r.Body)
		}
	}
	if e["type"] != typ || e["msg"] == "" {
		t.Fatalf("type %v, want %s: %s", e["type"], typ, r.Body)
	}
}
