package orgapi

import (
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/server/auth"
	"slipway/server/httpx"
	"slipway/storage"
)

// TestAuditGate covers each denial rule of the audit-log API: the role,
// the plan, the organization flag, and the install-wide default that never
// applies to personal organizations.
func TestAuditGate(t *testing.T) {
	db, err := storage.Open(filepath.Join(t.TempDir(), "db"), time.Second, storage.ControlPlaneMigrations)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	admin := &auth.Principal{OrgRole: auth.OrgAdmin}
	operator := &auth.Principal{OrgRole: auth.OrgOperator}
	cases := []struct {
		name       string
		p          *auth.Principal
		plan       string
		personal   bool
		flag       any // nil: unset
		envDefault bool
		wantErr    string // "" = allowed
	}{
		{"admin, enterprise, flag on", admin, "enterprise", false, true, false, ""},
		{"operator, enterprise, flag on", operator, "enterprise", false, true, false, ""},
		{"org user", &auth.Principal{OrgRole: auth.OrgUser, WorkspaceRole: auth.WSAdmin}, "enterprise", false, true, false, "organization:manage"},
		{"org viewer", &auth.Principal{OrgRole: auth.OrgViewer}, "enterprise", false, true, false, "organization:manage"},
		{"workspace admin key", &auth.Principal{WorkspaceRole: auth.WSAdmin}, "enterprise", false, true, false, "organization:manage"},
		{"plus plan", admin, "plus", false, true, false, "Enterprise"},
		{"free plan", admin, "free", false, true, true, "Enterprise"},
		{"flag unset", admin, "enterprise", false, nil, false, "not enabled"},
		{"flag off", admin, "enterprise", false, false, false, "not enabled"},
		{"env default", admin, "enterprise", false, nil, true, ""},
		{"flag off beats env default", admin, "enterprise", false, false, true, "not enabled"},
		{"env default, personal org", admin, "enterprise", true, nil, true, "personal"},
		{"flag on, personal org", admin, "enterprise", true, true, false, "personal"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			org := Org{ID: uuid.New(), Plan: tc.plan, IsPersonal: tc.personal, Config: map[string]any{}}
			if tc.flag != nil {
				org.Config["can_use_audit_logs"] = tc.flag
			}
			if err := db.Update(func(tx *bolt.Tx) error {
				return putOrg(tx, &org)
			}); err != nil {
				t.Fatal(err)
			}
			s := &Store{DB: db, DefaultAuditLogs: tc.envDefault}
			p := *tc.p
			p.OrgID = org.ID
			var gerr error
			_ = db.View(func(tx *bolt.Tx) error { gerr = s.auditGate(tx, &p); return nil })
			if tc.wantErr == "" {
				if gerr != nil {
					t.Fatalf("denied: %v", gerr)
				}
				return
			}
			var he *httpx.Error
			if !errors.As(httpError(gerr), &he) || he.Status != http.StatusForbidden || !strings.Contains(he.Detail, tc.wantErr) {
				t.Fatalf("got %v, want 403 mentioning %q", gerr, tc.wantErr)
			}
		})
	}
}
