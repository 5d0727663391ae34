package storage

import (
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestUpgradeFromEveryVersion opens a database created at each earlier
// schema version with the full migration list: every step applies, the
// version ends at the newest, and every bucket the layout names exists.
func TestUpgradeFromEveryVersion(t *testing.T) {
	buckets := []string{"orgs", "workspaces", "idx_org_workspaces", "users", "api_keys", "idx_api_key_hash",
		"deployments", "idx_ws_deployments", "idx_deployment_name", "idx_pending_deployments", "revisions",
		"idx_deployment_revisions", "listeners", "idx_ws_listeners", "idx_listener_compute", "revision_logs",
		"uploads", "tracing_projects", "idx_tracing_project_name", "audit_events", "idx_audit_op", "audit_anchors",
		"audit_forward", "idx_org_users", "idx_login_email", "sessions", "roles", "idx_org_roles", "pending_members",
		"idx_org_pending", "workspace_secrets", "ttl_settings", "audit_seals", "agent_logs"}
	for from := 0; from < len(ControlPlaneMigrations); from++ {
		path := filepath.Join(t.TempDir(), "db")
		db, err := Open(path, time.Second, ControlPlaneMigrations[:from])
		if err != nil {
			t.Fatalf("create at v%d: %v", from, err)
		}
		db.Close()
		db, err = Open(path, time.Second, ControlPlaneMigrations)
		if err != nil {
			t.Fatalf("upgrade from v%d: %v", from, err)
		}
		_ = db.View(func(tx *bolt.Tx) error {
			if v := Version(tx); v != len(ControlPlaneMigrations) {
				t.Errorf("from v%d: version %d", from, v)
			}
			for _, b := range buckets {
				if tx.Bucket([]byte(b)) == nil {
					t.Errorf("from v%d: bucket %s missing", from, b)
				}
			}
			return nil
		})
		db.Close()
	}
}
