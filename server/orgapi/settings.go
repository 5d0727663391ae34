package orgapi

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/julienschmidt/httprouter"
	bolt "go.etcd.io/bbolt"

	"slipway/server/audit"
	"slipway/server/auth"
	"slipway/server/httpx"
	"slipway/storage"
)

// ---- workspace members ----

// wsAdmin refuses callers who do not administer the request's workspace.
func wsAdmin(p *auth.Principal, what string) error {
	if p.WorkspaceID == uuid.Nil {
		return denied("This credential is organization-scoped and requires workspace specification: send the X-Tenant-Id header.")
	}
	if !p.CanAdminWorkspace() && !(p.OrgManage() && !p.ReadOnly) {
		return denied("%s requires the workspace Admin role or organization:manage.", what)
	}
	return nil
}

// listWorkspaceMembers: GET /api/v1/workspaces/current/members (TenantMembers).
func (s *Store) listWorkspaceMembers(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	if p.WorkspaceID == uuid.Nil {
		return denied("This credential is organization-scoped and requires workspace specification: send the X-Tenant-Id header.")
	}
	ws := p.WorkspaceID
	out := map[string]any{"tenant_id": ws}
	err := s.DB.View(func(tx *bolt.Tx) error {
		users, err := orgUsers(tx, p.OrgID)
		if err != nil {
			return err
		}
		members := []memberView{}
		for i := range users {
			if _, in := users[i].WorkspaceRoles[ws]; in && !users[i].Service {
				members = append(members, memberOf(tx, &users[i], &ws))
			}
		}
		pms, err := orgPending(tx, p.OrgID)
		if err != nil {
			return err
		}
		pending := []pendingView{}
		for i := range pms {
			if contains(uuidStrings(pms[i].WorkspaceIDs), ws.String()) {
				pending = append(pending, pendingOf(tx, &pms[i]))
			}
		}
		out["members"], out["pending"] = members, pending
		return nil
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// addWorkspaceMember: POST /api/v1/workspaces/current/members
// (add_member_to_workspace) — an existing organization member joins.
func (s *Store) addWorkspaceMember(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	if err := wsAdmin(p, "Adding workspace members"); err != nil {
		return err
	}
	var req struct {
		UserID        *uuid.UUID `json:"user_id"`
		OrgIdentityID *uuid.UUID `json:"org_identity_id"`
		LSUserID      *uuid.UUID `json:"ls_user_id"`
		ReadOnly      *bool      `json:"read_only"`
		RoleID        *uuid.UUID `json:"role_id"`
	}
	if err := httpx.DecodeJSON(r, &req, true); err != nil {
		return err
	}
	id := req.UserID
	for _, alt := range []*uuid.UUID{req.OrgIdentityID, req.LSUserID} {
		if id == nil {
			id = alt
		}
	}
	if id == nil {
		return httpx.Invalid("missing", "one of user_id, org_identity_id or ls_user_id is required", "body", "user_id")
	}
	var out memberView
	err := s.update(func(tx *bolt.Tx) error {
		role, err := workspaceRoleFor(tx, p.OrgID, req.RoleID, auth.WSViewer, "body", "role_id")
		if err != nil {
			return err
		}
		u, err := orgMember(tx, p.OrgID, httprouter.Params{{Key: "identity_id", Value: id.String()}})
		if err != nil {
			return err
		}
		if _, in := u.WorkspaceRoles[p.WorkspaceID]; in {
			return conflict("%s is already a member of workspace %s.", u.DisplayName, p.WorkspaceID)
		}
		out, err = grantWorkspaceRole(tx, r, u, p.WorkspaceID, role)
		return err
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// addWorkspaceMembersBatch: POST /api/v1/workspaces/current/members/batch
// (add_members_to_workspace_batch): organization members join at once;
// other emails are invited into the organization and this workspace.
func (s *Store) addWorkspaceMembersBatch(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	if err := wsAdmin(p, "Adding workspace members"); err != nil {
		return err
	}
	reqs, err := decodeBatch(r)
	if err != nil {
		return err
	}
	ws := p.WorkspaceID
	var out []pendingView
	err = s.update(func(tx *bolt.Tx) error {
		out = nil
		var res []audit.Resource
		for i := range reqs {
			if reqs[i].WorkspaceIDs != nil {
				return httpx.Invalid("value_error", "the workspace is the current one; leave workspace_ids out", "body", i, "workspace_ids")
			}
			// Workspace endpoints name the workspace role as role_id (or
			// workspace_role_id); they never carry an organization role,
			// which only organization:manage may grant. Invitees join the
			// organization as Organization User.
			if reqs[i].RoleID != nil && reqs[i].WorkspaceRoleID != nil {
				return httpx.Invalid("value_error", "a workspace invitation carries one workspace role: send role_id or workspace_role_id, not both; organization roles are granted through /api/v1/orgs/current/members", "body", i, "role_id")
			}
			if reqs[i].WorkspaceRoleID == nil {
				reqs[i].WorkspaceRoleID, reqs[i].RoleID = reqs[i].RoleID, nil
			}
			inv, err := s.checkInvite(tx, p, &reqs[i], false, []any{"body", i})
			if err != nil {
				return err
			}
			inv.workspaces = []uuid.UUID{ws}
			u, err := memberByEmail(tx, p.OrgID, inv.email)
			if err != nil {
				return err
			}
			if u != nil {
				if _, in := u.WorkspaceRoles[ws]; in {
					return conflict("%s is already a member of workspace %s.", inv.email, ws)
				}
				u.WorkspaceRoles[ws] = inv.wsRole
				if err := putUser(tx, u); err != nil {
					return err
				}
				uid := u.ID
				v := pendingView{ID: u.ID, Email: u.Email, WorkspaceIDs: []uuid.UUID{ws}, AccessScope: "workspace",
					UserID: &uid, TenantID: &ws, OrganizationID: u.OrgID, CreatedAt: s.now()}
				v.RoleID, v.RoleName = roleRef(tx, inv.wsRole)
				v.WorkspaceRoleID = v.RoleID
				out = append(out, v)
				res = append(res, audit.Res(u.ID, "user"))
				continue
			}
			pm, err := s.invite(tx, p, inv)
			if err != nil {
				return err
			}
			out = append(out, pendingOf(tx, pm))
			res = append(res, audit.Res(pm.ID, "pending_member"))
		}
		return audit.Success(tx, r, http.StatusOK, append(res, audit.Res(ws, "workspace"))...)
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// workspaceMember loads a member of the request's workspace.
func workspaceMember(tx *bolt.Tx, p *auth.Principal, ps httprouter.Params) (*User, error) {
	u, err := orgMember(tx, p.OrgID, ps)
	if err != nil {
		return nil, err
	}
	if _, in := u.WorkspaceRoles[p.WorkspaceID]; !in {
		return nil, notFound("Member %s not found in workspace %s.", u.ID, p.WorkspaceID)
	}
	return u, nil
}

// updateWorkspaceMember: PATCH /api/v1/workspaces/current/members/{identity_id}
// (update_workspace_member).
func (s *Store) updateWorkspaceMember(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p := auth.From(r)
	if err := wsAdmin(p, "Changing workspace members"); err != nil {
		return err
	}
	var req struct {
		ReadOnly *bool      `json:"read_only"`
		RoleID   *uuid.UUID `json:"role_id"`
	}
	if err := httpx.DecodeJSON(r, &req, true); err != nil {
		return err
	}
	if req.RoleID == nil {
		return httpx.Invalid("missing", "Field required", "body", "role_id")
	}
	var out memberView
	err := s.update(func(tx *bolt.Tx) error {
		role, err := workspaceRoleFor(tx, p.OrgID, req.RoleID, "", "body", "role_id")
		if err != nil {
			return err
		}
		u, err := workspaceMember(tx, p, ps)
		if err != nil {
			return err
		}
		out, err = grantWorkspaceRole(tx, r, u, p.WorkspaceID, role)
		return err
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// deleteWorkspaceMember: DELETE /api/v1/workspaces/current/members/{identity_id}
// (delete_workspace_member). The person stays in the organization.
func (s *Store) deleteWorkspaceMember(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p := auth.From(r)
	if err := wsAdmin(p, "Removing workspace members"); err != nil {
		return err
	}
	err := s.update(func(tx *bolt.Tx) error {
		u, err := workspaceMember(tx, p, ps)
		if err != nil {
			return err
		}
		delete(u.WorkspaceRoles, p.WorkspaceID)
		return errors.Join(putUser(tx, u), audit.Success(tx, r, http.StatusOK, audit.Res(u.ID, "user"), audit.Res(p.WorkspaceID, "workspace")))
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{})
	return nil
}

// deleteWorkspacePending: DELETE /api/v1/workspaces/current/members/{identity_id}/pending
// (delete_workspace_pending_member): the invitation no longer brings its
// invitee into this workspace; an invitation left with no workspace is
// withdrawn, since it came from workspace invitations only.
func (s *Store) deleteWorkspacePending(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p := auth.From(r)
	if err := wsAdmin(p, "Withdrawing workspace invitations"); err != nil {
		return err
	}
	err := s.update(func(tx *bolt.Tx) error {
		pm, err := pendingByPath(tx, p.OrgID, ps)
		if err != nil {
			return err
		}
		kept := pm.WorkspaceIDs[:0]
		for _, ws := range pm.WorkspaceIDs {
			if ws != p.WorkspaceID {
				kept = append(kept, ws)
			}
		}
		if len(kept) == len(pm.WorkspaceIDs) {
			return notFound("Pending member %s not found in workspace %s.", pm.ID, p.WorkspaceID)
		}
		pm.WorkspaceIDs = kept
		change := putPending(tx, pm)
		if len(kept) == 0 {
			change = deletePending(tx, pm)
		}
		return errors.Join(change, audit.Success(tx, r, http.StatusOK, audit.Res(pm.ID, "pending_member"), audit.Res(p.WorkspaceID, "workspace")))
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{})
	return nil
}

// ---- workspace secrets ----

var secretKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,255}$`)

// listWorkspaceSecrets: GET /api/v1/workspaces/current/secrets — the keys only.
func (s *Store) listWorkspaceSecrets(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	if p.WorkspaceID == uuid.Nil {
		return denied("This credential is organization-scoped and requires workspace specification: send the X-Tenant-Id header.")
	}
	out := []map[string]string{}
	err := s.DB.View(func(tx *bolt.Tx) error {
		for _, k := range workspaceSecretKeys(tx, p.WorkspaceID) {
			out = append(out, map[string]string{"key": k})
		}
		return nil
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// upsertWorkspaceSecrets: POST /api/v1/workspaces/current/secrets
// (update_workspace_secrets). A null value deletes the secret. Values are
// sealed under the master key; the event names the keys, never a value.
func (s *Store) upsertWorkspaceSecrets(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	if err := wsAdmin(p, "Changing workspace secrets"); err != nil {
		return err
	}
	reqs, err := decodeList[struct {
		Key   *string `json:"key"`
		Value *string `json:"value"`
	}](r)
	if err != nil {
		return err
	}
	if len(reqs) == 0 || len(reqs) > 100 {
		return httpx.Invalid("value_error", "send 1 to 100 secrets", "body")
	}
	seen := map[string]bool{}
	for i, q := range reqs {
		if q.Key == nil {
			return httpx.Invalid("missing", "Field required", "body", i, "key")
		}
		if !secretKeyRE.MatchString(*q.Key) {
			return httpx.Invalid("string_pattern_mismatch", "key must be a letter or underscore followed by letters, digits or underscores (at most 256)", "body", i, "key")
		}
		if seen[*q.Key] {
			return httpx.Invalid("value_error", "key "+*q.Key+" is listed twice", "body", i, "key")
		}
		seen[*q.Key] = true
		if q.Value != nil && len(*q.Value) > 64*1024 {
			return httpx.Invalid("string_too_long", "value must be at most 65536 bytes", "body", i, "value")
		}
	}
	if s.Sealer == nil {
		return errors.New("workspace secrets: no sealer configured")
	}
	err = s.update(func(tx *bolt.Tx) error {
		for _, q := range reqs {
			var err error
			if q.Value == nil {
				err = deleteWorkspaceSecret(tx, p.WorkspaceID, *q.Key)
			} else {
				err = putWorkspaceSecret(tx, p.WorkspaceID, *q.Key, s.Sealer.Seal(*q.Value, p.WorkspaceID.String()+"/"+*q.Key))
			}
			if err != nil {
				return fmt.Errorf("workspace secret %s: %w", *q.Key, err)
			}
		}
		return audit.Success(tx, r, http.StatusOK, audit.Res(p.WorkspaceID, "workspace"))
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{})
	return nil
}

// ---- TTL (retention) settings ----

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
	p := auth.From(r)
	if err := orgManager(p, "Changing retention settings"); err != nil {
		return err
	}
	var req struct {
		TenantID              *uuid.UUID `json:"tenant_id"`
		DefaultTraceTier      *string    `json:"default_trace_tier"`
		ApplyToAllProjects    *bool      `json:"apply_to_all_projects"`
		AuditLogRetentionDays *int       `json:"audit_log_retention_days"`
	}
	if err := httpx.DecodeJSON(r, &req, true); err != nil {
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
	err := s.update(func(tx *bolt.Tx) error {
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
		return errors.Join(putTTL(tx, t), audit.Success(tx, r, http.StatusOK, res...))
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// ---- organization service keys ----

// createOrgServiceKey: POST /api/v1/orgs/current/service-keys
// (create_service_key): an organization-scoped key acting as its own
// service identity with an organization role (Organization User unless
// org_role_id says otherwise). An Operator cannot mint Admin keys.
func (s *Store) createOrgServiceKey(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	if err := orgManager(p, "Creating organization service keys"); err != nil {
		return err
	}
	req, err := s.decodeKeyRequest(r)
	if err != nil {
		return err
	}
	role := auth.OrgUser
	if req.OrgRoleID != nil {
		id, err := uuid.Parse(*req.OrgRoleID)
		if err != nil {
			if r, ok := builtinByName(*req.OrgRoleID); ok && r.AccessScope == "organization" {
				id = r.ID
			} else {
				return httpx.Invalid("value_error", "org_role_id must name an organization role", "body", "org_role_id")
			}
		}
		if role, err = orgRoleFor(&id, "", "body", "org_role_id"); err != nil {
			return err
		}
	}
	if role == auth.OrgAdmin && p.OrgRole != auth.OrgAdmin {
		return denied("Only an Organization Admin can create keys with the Organization Admin role.")
	}
	key := auth.NewKey("slw_sk")
	now := s.now()
	k := APIKey{ID: storage.NewID(), Kind: auth.KindServiceKey, Hash: auth.Hash(key), ShortKey: auth.ShortKey(key),
		Description: deref(req.Description, "Organization service key"), ReadOnly: req.ReadOnly != nil && *req.ReadOnly,
		OrgID: p.OrgID, OrgRole: role, CreatedAt: now, ExpiresAt: req.ExpiresAt}
	svc := User{ID: storage.NewID(), OrgID: p.OrgID, DisplayName: "service key " + k.ShortKey, Service: true, OrgRole: role,
		WorkspaceRoles: map[uuid.UUID]string{}, CreatedAt: now}
	k.UserID = svc.ID
	var resp keyResponse
	err = s.update(func(tx *bolt.Tx) error {
		if req.DefaultWorkspaceID != nil {
			if !workspaceInOrg(tx, p.OrgID, *req.DefaultWorkspaceID) {
				return httpx.Invalid("value_error", "default_workspace_id is not a workspace of this organization", "body", "default_workspace_id")
			}
			ws := *req.DefaultWorkspaceID
			k.DefaultWorkspaceID = &ws
		}
		if err := errors.Join(putUser(tx, &svc), putKey(tx, &k)); err != nil {
			return err
		}
		resp = keyView(tx, &k)
		return audit.Success(tx, r, http.StatusOK, audit.Res(k.ID, "service_key"))
	})
	if err != nil {
		return err
	}
	resp.Key = key
	httpx.WriteJSON(w, http.StatusOK, resp)
	return nil
}

func isOrgServiceKey(k *APIKey, org uuid.UUID) bool {
	return k.OrgID == org && k.Kind == auth.KindServiceKey && k.WorkspaceID == nil
}

// listOrgServiceKeys: GET /api/v1/orgs/current/service-keys.
func (s *Store) listOrgServiceKeys(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	if !p.OrgManage() {
		return denied("Listing organization service keys requires organization:manage.")
	}
	out := []keyResponse{}
	err := s.DB.View(func(tx *bolt.Tx) error {
		keys, err := keysWhere(tx, func(k *APIKey) bool { return isOrgServiceKey(k, p.OrgID) })
		for i := range keys {
			out = append(out, keyView(tx, &keys[i]))
		}
		return err
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// deleteOrgServiceKey: DELETE /api/v1/orgs/current/service-keys/{api_key_id}
// (delete_service_key). The key's service identity goes with it.
func (s *Store) deleteOrgServiceKey(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p := auth.From(r)
	id, err := httpx.ParseID(ps.ByName("api_key_id"), "path", "api_key_id")
	if err != nil {
		return err
	}
	if err := orgManager(p, "Deleting organization service keys"); err != nil {
		return err
	}
	var resp keyResponse
	err = s.update(func(tx *bolt.Tx) error {
		k, err := getKey(tx, id)
		if err != nil || !isOrgServiceKey(k, p.OrgID) {
			return notFound("Service key %s not found.", id)
		}
		if k.OrgRole == auth.OrgAdmin && p.OrgRole != auth.OrgAdmin {
			return denied("Only an Organization Admin can delete keys with the Organization Admin role.")
		}
		resp = keyView(tx, k)
		return errors.Join(deleteKey(tx, k), deleteUserRecord(tx, k.OrgID, k.UserID),
			audit.Success(tx, r, http.StatusOK, audit.Res(k.ID, "service_key")))
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, resp)
	return nil
}

// ---- organization info ----

// orgInfo is the part of the hosted OrganizationInfo shape Slipway has.
type orgInfo struct {
	ID          uuid.UUID      `json:"id"`
	DisplayName string         `json:"display_name"`
	Config      map[string]any `json:"config"`
	IsPersonal  bool           `json:"is_personal"`
	Tier        string         `json:"tier"`
	Permissions []string       `json:"permissions"`
	Disabled    bool           `json:"disabled"`
}

func infoOf(org *Org, p *auth.Principal) orgInfo {
	perms := []string{"organization:read"}
	if p.OrgManage() {
		perms = append(perms, "organization:manage")
	}
	cfg := org.Config
	if cfg == nil {
		cfg = map[string]any{}
	}
	return orgInfo{ID: org.ID, DisplayName: org.DisplayName, Config: cfg, IsPersonal: org.IsPersonal, Tier: org.Plan, Permissions: perms}
}

// getOrgInfo: GET /api/v1/orgs/current/info.
func (s *Store) getOrgInfo(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	var out orgInfo
	err := s.DB.View(func(tx *bolt.Tx) error {
		var org Org
		if err := getOrg(tx, p.OrgID, &org); err != nil {
			return err
		}
		out = infoOf(&org, p)
		return nil
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// updateOrgInfo: PATCH /api/v1/orgs/current/info (update_organization_info).
// Only the display name is Slipway's to change; the plan and feature flags
// belong to the host administrator (slipway admin org ...).
func (s *Store) updateOrgInfo(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	if err := orgManager(p, "Changing the organization"); err != nil {
		return err
	}
	var req struct {
		DisplayName *string `json:"display_name"`
	}
	if err := httpx.DecodeJSON(r, &req, true); err != nil {
		return err
	}
	if err := validateDisplayName(req.DisplayName); err != nil {
		return err
	}
	var out orgInfo
	err := s.update(func(tx *bolt.Tx) error {
		var org Org
		if err := getOrg(tx, p.OrgID, &org); err != nil {
			return err
		}
		org.DisplayName = strings.TrimSpace(*req.DisplayName)
		out = infoOf(&org, p)
		return errors.Join(putOrg(tx, &org),
			audit.Success(tx, r, http.StatusOK, audit.Res(org.ID, "organization")))
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// grantWorkspaceRole gives u role in workspace ws and writes the user with
// its audit event, in the caller's transaction.
func grantWorkspaceRole(tx *bolt.Tx, r *http.Request, u *User, ws uuid.UUID, role string) (memberView, error) {
	if u.WorkspaceRoles == nil {
		u.WorkspaceRoles = map[uuid.UUID]string{}
	}
	u.WorkspaceRoles[ws] = role
	out := memberOf(tx, u, &ws)
	return out, errors.Join(putUser(tx, u), audit.Success(tx, r, http.StatusOK, audit.Res(u.ID, "user"), audit.Res(ws, "workspace")))
}
