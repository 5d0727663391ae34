package admin_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/server/apptest"
	"slipway/server/audit/ocsftest"
	"slipway/server/servertest"
	"slipway/storage"
)

// adminEvents reads every audit event of org with key, oldest first, and
// checks each against the OCSF 1.7.0 schema.
func adminEvents(t *testing.T, s *servertest.Server, key, org string) []map[string]any {
	t.Helper()
	r := auditLogs(s, key, org)
	if r.Status != 200 {
		t.Fatalf("audit-logs: %d %s", r.Status, r.Body)
	}
	schema, err := ocsftest.Load(ocsftest.SchemaDir())
	if err != nil {
		t.Fatalf("load the OCSF 1.7.0 schema: %v", err)
	}
	var out []map[string]any
	for _, it := range r.Map()["items"].([]any) {
		e := it.(map[string]any)
		raw, _ := json.Marshal(e)
		if v := schema.ValidateJSON(raw); len(v) > 0 {
			t.Fatalf("event is not valid OCSF 1.7.0: %v\n%s", v, raw)
		}
		out = append(out, e)
	}
	return out
}

// TestAdminOperationsAudited performs every change the admin socket offers
// (org create, create-admin-key, set-plan, set-flag, unset-flag, audit
// prune) and two it refuses, then reads the organization's audit log: each
// is one event in that organization's chain, with the host administrator
// as the actor (the nil UUID, type Admin, the socket peer's unix uid, no
// credential), service slipway-admin, the host's name as source, the
// socket route and status; none lands in another organization's chain.
func TestAdminOperationsAudited(t *testing.T) {
	s := apptest.New(t, map[string]string{"DEFAULT_ORG_FEATURE_CAN_USE_AUDIT_LOGS": "true"})
	id := strings.TrimSpace(mustAdmin(t, s.DataDir, "org", "create", "--name", "Acme", "--plan", "enterprise"))
	key := strings.TrimSpace(mustAdmin(t, s.DataDir, "org", "create-admin-key", id))
	var keyID string
	for _, k := range s.Do("GET", "/api/v1/orgs/current/service-keys", nil, "X-Api-Key", key).JSON().([]any) {
		keyID = k.(map[string]any)["id"].(string)
	}
	mustAdmin(t, s.DataDir, "org", "set-plan", id, "plus")
	mustAdmin(t, s.DataDir, "org", "set-plan", id, "enterprise")
	mustAdmin(t, s.DataDir, "org", "set-flag", id, "can_use_audit_logs", "true")
	mustAdmin(t, s.DataDir, "org", "unset-flag", id, "can_use_audit_logs")
	if _, _, code := runAdmin(t, s.DataDir, "org", "set-flag", id, "can_fly", "true"); code != 1 {
		t.Fatalf("unknown flag: exit %d", code)
	}
	if _, _, code := runAdmin(t, s.DataDir, "org", "set-plan", id, "platinum"); code != 1 {
		t.Fatalf("unknown plan: exit %d", code)
	}

	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	uidAlt := fmt.Sprintf("unix uid %d", os.Getuid())
	type want struct {
		op, status, method, path string
		code                     float64
		resource                 string
	}
	check := func(events []map[string]any, wants []want) {
		t.Helper()
		raw, _ := json.MarshalIndent(events, "", " ")
		if len(events) != len(wants) {
			t.Fatalf("%d events, want %d:\n%s", len(events), len(wants), raw)
		}
		for i, w := range wants {
			e := events[i]
			user := e["actor"].(map[string]any)["user"].(map[string]any)
			req := e["http_request"].(map[string]any)
			var res []string
			for _, r := range e["resources"].([]any) {
				res = append(res, r.(map[string]any)["uid"].(string))
			}
			native := e["unmapped"].(map[string]any)["original_audit_log"].(map[string]any)
			if e["class_uid"] != float64(6003) || e["api"].(map[string]any)["operation"] != w.op || e["status"] != w.status ||
				req["http_method"] != w.method || req["url"].(map[string]any)["path"] != w.path ||
				e["http_response"].(map[string]any)["code"] != w.code || !strings.Contains(strings.Join(res, " "), w.resource) {
				t.Fatalf("event %d is not %+v:\n%s", i, w, raw)
			}
			if user["uid"] != "00000000-0000-0000-0000-000000000000" || user["type"] != "Admin" || user["type_id"] != float64(2) ||
				user["uid_alt"] != uidAlt || user["credential_uid"] != nil || user["name"] != "host administrator" {
				t.Fatalf("event %d actor %v, want the host administrator (%s)", i, user, uidAlt)
			}
			if e["api"].(map[string]any)["service"].(map[string]any)["name"] != "slipway-admin" ||
				e["src_endpoint"].(map[string]any)["hostname"] != host || native["organization_id"] != id ||
				native["user_id"] != user["uid"] {
				t.Fatalf("event %d source %v / %v / %v", i, e["api"], e["src_endpoint"], native)
			}
		}
	}
	orgPath := "/v1/orgs/" + id
	check(adminEvents(t, s, key, id), []want{
		{"create_organization", "Success", "POST", "/v1/orgs", 201, id},
		{"create_service_key", "Success", "POST", orgPath + "/admin-keys", 201, keyID},
		{"update_payment_plan", "Success", "PUT", orgPath + "/plan", 200, id},
		{"update_payment_plan", "Success", "PUT", orgPath + "/plan", 200, id},
		{"update_organization_config", "Success", "PUT", orgPath + "/flags/can_use_audit_logs", 200, id},
		{"update_organization_config", "Success", "DELETE", orgPath + "/flags/can_use_audit_logs", 200, id},
		{"update_organization_config", "Failure", "PUT", orgPath + "/flags/can_fly", 400, id},
		{"update_payment_plan", "Failure", "PUT", orgPath + "/plan", 400, id},
	})
	// The Default organization's chain has none of it.
	for _, e := range adminEvents(t, s, s.Key, defaultOrg(t, s.DataDir)) {
		if e["actor"].(map[string]any)["user"].(map[string]any)["type"] == "Admin" {
			t.Fatalf("a host administrator's event in the Default organization: %v", e)
		}
	}

	// Pruning Acme's events leaves one saying so, in the same chain.
	time.Sleep(5 * time.Millisecond)
	cutoff := time.Now().UTC()
	mustAdmin(t, s.DataDir, "audit", "prune", "--before", cutoff.Format(time.RFC3339Nano), "--org", id)
	events := adminEvents(t, s, key, id)
	check(events, []want{{"delete_audit_logs", "Success", "POST", "/v1/audit/prune", 200, id}})
	if name := events[0]["resources"].([]any)[0].(map[string]any)["name"]; name != "8 event(s) before "+cutoff.Format(time.RFC3339Nano) {
		t.Fatalf("prune event resource name %q", name)
	}
	if out := mustAdmin(t, s.DataDir, "audit", "verify"); !strings.Contains(out, "intact") {
		t.Fatalf("verify: %s", out)
	}
}

func defaultOrg(t *testing.T, dataDir string) string {
	t.Helper()
	for id, o := range listOrgs(t, dataDir) {
		if o.DisplayName == "Default" {
			return id
		}
	}
	t.Fatal("no Default organization")
	return ""
}

// TestAdminAuditVerifyIndex edits the operation index in copies of a
// stopped server's database file: the entries of create_deployment deleted
// (which hid those events from filtered queries and passed verify), an
// entry added under another operation, one naming a record that does not
// exist. `slipway admin audit verify` exits 1 naming each; filtered
// queries never show an event under an operation it is not and never fail;
// `slipway admin audit reindex` repairs the index, which verify then
// passes, and records that it did.
func TestAdminAuditVerifyIndex(t *testing.T) {
	s := apptest.New(t, map[string]string{"DEFAULT_ORG_FEATURE_CAN_USE_AUDIT_LOGS": "true"})
	for i := 1; i <= 3; i++ {
		createDeployment(t, s, s.Key, fmt.Sprintf("d%d", i))
	}
	org := defaultOrg(t, s.DataDir)
	orgID := uuid.MustParse(org)
	s.Stop()
	idxKey := func(op string, seq uint64) []byte { return storage.Key(orgID, op, []byte{0}, storage.U64(seq)) }
	filtered := func(c *servertest.Server, op string) int {
		t.Helper()
		r := c.Do("GET", "/api/v1/audit-logs?start_time=2000-01-01T00:00:00Z&end_time=2100-01-01T00:00:00Z&limit=100&operations="+op, nil)
		if r.Status != 200 {
			t.Fatalf("audit-logs filtered by %s: %d %s", op, r.Status, r.Body)
		}
		items := r.Map()["items"].([]any)
		for _, it := range items {
			if got := it.(map[string]any)["api"].(map[string]any)["operation"]; got != op {
				t.Fatalf("filtered by %s, the query returned a %s event", op, got)
			}
		}
		return len(items)
	}
	cases := []struct {
		name   string
		mutate func(idx *bolt.Bucket) error
		want   string // in the verify output; "" for intact
	}{
		{"untouched", func(*bolt.Bucket) error { return nil }, ""},
		{"create_deployment entries deleted", func(idx *bolt.Bucket) error {
			for seq := uint64(1); seq <= 3; seq++ {
				if idx.Get(idxKey("create_deployment", seq)) == nil {
					return fmt.Errorf("no index entry for record %d", seq)
				}
				if err := idx.Delete(idxKey("create_deployment", seq)); err != nil {
					return err
				}
			}
			return nil
		}, "organization " + org + ": first broken record seq 1: operation index: record 1 (create_deployment) is missing from the index"},
		{"entry added under another operation", func(idx *bolt.Bucket) error {
			return idx.Put(idxKey("delete_deployment", 2), nil)
		}, "first broken record seq 2: operation index: an entry under delete_deployment names record 2, which is create_deployment"},
		{"entry for a record that does not exist", func(idx *bolt.Bucket) error {
			return idx.Put(idxKey("delete_deployment", 7), nil)
		}, "first broken record seq 7: operation index: an entry under delete_deployment names record 7, which the chain does not hold"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, s.DataDir)
			editTx(t, dir, func(tx *bolt.Tx) error { return tc.mutate(tx.Bucket([]byte("idx_audit_op"))) })
			c := apptest.New(t, map[string]string{"SLIPWAY_DATA_DIR": dir, "DEFAULT_ORG_FEATURE_CAN_USE_AUDIT_LOGS": "true"})
			out, errOut, code := runAdmin(t, dir, "audit", "verify")
			if tc.want == "" {
				if code != 0 || !strings.Contains(out, "intact") {
					t.Fatalf("untouched copy: exit %d\n%s%s", code, out, errOut)
				}
			} else if code != 1 || !strings.Contains(out, tc.want) {
				t.Fatalf("verify: exit %d\n%s%s\nwant exit 1 and %q", code, out, errOut, tc.want)
			}
			created := filtered(c, "create_deployment")
			if deleted := filtered(c, "delete_deployment"); deleted != 0 {
				t.Fatalf("%d delete_deployment events, want none", deleted)
			}
			// Deleted entries hide events from filtered queries: that is
			// what verify is there to report.
			if want := map[bool]int{true: 0, false: 3}[tc.name == "create_deployment entries deleted"]; created != want {
				t.Fatalf("%d create_deployment events, want %d", created, want)
			}
			if tc.want == "" {
				return
			}
			if out := mustAdmin(t, dir, "audit", "reindex"); !strings.Contains(out, "organization "+org+": reindexed 3 event(s)") {
				t.Fatalf("reindex: %s", out)
			}
			if out := mustAdmin(t, dir, "audit", "verify"); !strings.Contains(out, "intact: 1 organization(s), 4 event(s)") {
				t.Fatalf("verify after reindex: %s", out)
			}
			if created := filtered(c, "create_deployment"); created != 3 {
				t.Fatalf("after reindex: %d create_deployment events, want 3", created)
			}
			if filtered(c, "update_audit_index") != 1 {
				t.Fatal("the reindex left no update_audit_index event")
			}
		})
	}
}
