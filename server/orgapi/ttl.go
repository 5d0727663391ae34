package orgapi

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/julienschmidt/httprouter"
	bolt "go.etcd.io/bbolt"

	"slipway/server/audit"
	"slipway/server/auth"
	"slipway/server/httpx"
	"slipway/server/track"
	"slipway/storage"
)

// TTLSettings is the hosted TTLSettings shape plus Slipway's audit-log
// retention, which only an organization-level setting carries.
type TTLSettings struct {
	ID                    uuid.UUID  `json:"id"`
	OrgID                 uuid.UUID  `json:"organization_id"`
	TenantID              *uuid.UUID `json:"tenant_id"`
	DefaultTraceTier      string     `json:"default_trace_tier"`
	ApplyToAllProjects    bool       `json:"apply_to_all_projects"`
	ConfiguredBy          string     `json:"configured_by"`
	LonglivedTTLDays      int        `json:"longlived_ttl_days"`
	AuditLogRetentionDays *int       `json:"audit_log_retention_days,omitempty"`
	CreatedAt             time.Time  `json:"created_at"`
	UpdatedAt             time.Time  `json:"updated_at"`
}

// MaxAuditRetentionDays is the spec's limit: events are kept up to 400 days.
const MaxAuditRetentionDays = 400

// AuditRetention is how long org keeps its audit events: the
// audit_log_retention_days of its organization-level TTL settings, or 0
// (meaning audit.DefaultRetention, 400 days) when it set none. It has the
// signature of audit.Retention.For, which calls it inside the pruning
// transaction so a setting and the pruning it allows cannot interleave.
func (s *Store) AuditRetention(tx *bolt.Tx, org uuid.UUID) time.Duration {
	t, err := getTTL(tx, org, nil)
	if err != nil || t.AuditLogRetentionDays == nil {
		return 0
	}
	return time.Duration(*t.AuditLogRetentionDays) * 24 * time.Hour
}

// listTTLSettings: GET /api/v1/orgs/ttl-settings — the organization's and
// its workspaces' settings.
func (s *Store) listTTLSettings(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	out := []TTLSettings{}
	err := s.DB.View(func(tx *bolt.Tx) error {
		all, err := orgTTLs(tx, p.OrgID)
		out = append(out, all...)
		return err
	})
	if err != nil {
		return err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TenantID == nil && out[j].TenantID != nil })
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// upsertTTLSettings: PUT /api/v1/orgs/ttl-settings (update_ttl_settings).
// Without tenant_id it sets the organization's settings, including
// audit_log_retention_days (1 to 400; null restores the 400-day default);
// with tenant_id, a workspace's trace settings.
func (s *Store) upsertTTLSettings(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	var req struct {
		TenantID              *uuid.UUID `json:"tenant_id"`
		DefaultTraceTier      *string    `json:"default_trace_tier"`
		ApplyToAllProjects    *bool      `json:"apply_to_all_projects"`
		AuditLogRetentionDays *int       `json:"audit_log_retention_days"`
	}
	p, err := managerBody(r, "Changing retention settings", &req)
	if err != nil {
		return err
	}
	if req.DefaultTraceTier == nil {
		return httpx.Invalid("missing", "Field required", "body", "default_trace_tier")
	}
	if *req.DefaultTraceTier != "longlived" && *req.DefaultTraceTier != "shortlived" {
		return httpx.Invalid("enum", "Input should be 'longlived' or 'shortlived'", "body", "default_trace_tier")
	}
	if d := req.AuditLogRetentionDays; d != nil {
		if req.TenantID != nil {
			return httpx.Invalid("value_error", "audit-log retention is an organization setting; send it without tenant_id", "body", "audit_log_retention_days")
		}
		if *d < 1 {
			return httpx.Invalid("greater_than_equal", "Input should be greater than or equal to 1", "body", "audit_log_retention_days")
		}
		if *d > MaxAuditRetentionDays {
			return httpx.Invalid("less_than_equal", fmt.Sprintf("Input should be less than or equal to %d (audit events are kept up to 400 days)", MaxAuditRetentionDays), "body", "audit_log_retention_days")
		}
	}
	var out TTLSettings
	return s.changeJSON(w, &out, func(tx *bolt.Tx) error {
		if req.TenantID != nil && !workspaceInOrg(tx, p.OrgID, *req.TenantID) {
			return httpx.Invalid("value_error", fmt.Sprintf("workspace %s is not a workspace of this organization", req.TenantID), "body", "tenant_id")
		}
		now := s.now()
		t, err := getTTL(tx, p.OrgID, req.TenantID)
		if err != nil {
			t = &TTLSettings{ID: storage.NewID(), OrgID: p.OrgID, TenantID: req.TenantID, CreatedAt: now}
		}
		t.DefaultTraceTier, t.ConfiguredBy, t.UpdatedAt = *req.DefaultTraceTier, "user", now
		t.LonglivedTTLDays = MaxAuditRetentionDays
		t.ApplyToAllProjects = req.ApplyToAllProjects != nil && *req.ApplyToAllProjects
		if req.TenantID == nil {
			t.AuditLogRetentionDays = req.AuditLogRetentionDays
		}
		out = *t
		res := []audit.Resource{audit.Res(t.ID, "ttl_settings")}
		if req.TenantID != nil {
			res = append(res, audit.Res(*req.TenantID, "workspace"))
		}
		return errors.Join(putTTL(tx, t), track.Success(tx, r, http.StatusOK, res...))
	})
}
