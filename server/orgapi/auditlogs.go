package orgapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/julienschmidt/httprouter"
	bolt "go.etcd.io/bbolt"

	"slipway/server/audit"
	"slipway/server/auth"
	"slipway/server/httpx"
)

// AuditLogsEnabled reports whether an organization may read its audit log:
// its own `can_use_audit_logs` flag, or the install-wide default, which
// (as the spec says) never applies to personal organizations.
func (s *Store) AuditLogsEnabled(org *Org) bool {
	if v, ok := org.Config["can_use_audit_logs"].(bool); ok && !org.IsPersonal {
		return v
	}
	return s.DefaultAuditLogs && !org.IsPersonal
}

// auditGate answers the denials of the audit-log API in a fixed order:
// role, then plan, then feature flag, each with a detail saying which.
func (s *Store) auditGate(tx *bolt.Tx, p *auth.Principal) error {
	if !p.OrgManage() {
		return denied("Audit logs require the Organization Admin or Organization Operator role (permission organization:manage); workspace roles do not grant it.")
	}
	org, err := readOrg(tx, p.OrgID)
	if err != nil {
		return err
	}
	if org.Plan != "enterprise" {
		return denied("Audit logs are an Enterprise plan feature; organization %s is on the %s plan.", org.ID, org.Plan)
	}
	if !s.AuditLogsEnabled(org) {
		if org.IsPersonal {
			return denied("Audit logs are not available for personal organizations.")
		}
		return denied("Audit logs are not enabled for organization %s: set its can_use_audit_logs flag (slipway admin org set-flag) or DEFAULT_ORG_FEATURE_CAN_USE_AUDIT_LOGS=true.", org.ID)
	}
	return nil
}

// parseTime accepts ISO 8601 date-times, with or without a zone (UTC when
// absent), and plain dates.
func parseTime(v string, name string) (time.Time, error) {
	if v == "" {
		return time.Time{}, httpx.Invalid("missing", "Field required", "query", name)
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, httpx.Invalid("datetime_parsing", "Input should be a valid ISO 8601 datetime", "query", name)
}

// parseAuditQuery validates the query parameters of GET /api/v1/audit-logs.
func parseAuditQuery(r *http.Request, org uuid.UUID) (audit.Query, error) {
	q := r.URL.Query()
	aq := audit.Query{Org: org, Limit: 10}
	start, err := parseTime(q.Get("start_time"), "start_time")
	if err != nil {
		return aq, err
	}
	end, err := parseTime(q.Get("end_time"), "end_time")
	if err != nil {
		return aq, err
	}
	if end.Before(start) {
		return aq, httpx.Invalid("value_error", "end_time must not be before start_time", "query", "end_time")
	}
	// Both bounds are inclusive at millisecond precision, the events' own.
	aq.Start, aq.End = start.UnixMilli(), end.UnixMilli()
	if aq.Limit, err = httpx.QueryInt(q, "limit", aq.Limit, 1, 100); err != nil {
		return aq, err
	}
	if v := q.Get("cursor"); v != "" {
		pos, err := audit.DecodeCursor(v)
		if err != nil {
			return aq, httpx.Invalid("value_error", "cursor must be a value returned by a previous page", "query", "cursor")
		}
		aq.After = pos
	}
	if v := q.Get("workspace_id"); v != "" {
		id, err := httpx.ParseID(v, "query", "workspace_id")
		if err != nil {
			return aq, err
		}
		aq.Workspace = id.String()
	}
	for i, op := range q["operations"] {
		if !audit.Known(op) {
			return aq, httpx.Invalid("enum", "Input should be an operation listed by GET /api/v1/audit-logs/operations", "query", "operations", i)
		}
		aq.Ops = append(aq.Ops, op)
	}
	return aq, nil
}

// listAuditLogs: GET /api/v1/audit-logs → {items, cursor}, oldest first.
func (s *Store) listAuditLogs(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	var page audit.Page
	err := s.DB.View(func(tx *bolt.Tx) error {
		if err := s.auditGate(tx, p); err != nil {
			return err
		}
		q, err := parseAuditQuery(r, p.OrgID)
		if err != nil {
			return err
		}
		page, err = s.Audit.Log.Run(tx, q)
		return err
	})
	if err != nil {
		return err
	}
	items := page.Items
	if items == nil {
		items = []json.RawMessage{}
	}
	var cursor *string
	if page.Next != nil {
		c := audit.EncodeCursor(*page.Next)
		cursor = &c
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"items": items, "cursor": cursor})
	return nil
}

// listAuditOperations: GET /api/v1/audit-logs/operations.
func (s *Store) listAuditOperations(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	httpx.WriteJSON(w, http.StatusOK, audit.Operations)
	return nil
}
