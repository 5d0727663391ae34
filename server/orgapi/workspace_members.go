package orgapi

import (
	"errors"
	"net/http"

	"github.com/google/uuid"
	"github.com/julienschmidt/httprouter"
	bolt "go.etcd.io/bbolt"

	"slipway/server/audit"
	"slipway/server/auth"
	"slipway/server/httpx"
	"slipway/server/track"
)

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
	return s.viewJSON(w, &out, func(tx *bolt.Tx) error {
		members, pending, err := memberList(tx, p.OrgID, &ws, true)
		out["members"], out["pending"] = members, pending
		return err
	})
}

// addWorkspaceMember: POST /api/v1/workspaces/current/members
// (add_member_to_workspace) — an existing organization member joins.
func (s *Store) addWorkspaceMember(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	var req struct {
		UserID        *uuid.UUID `json:"user_id"`
		OrgIdentityID *uuid.UUID `json:"org_identity_id"`
		LSUserID      *uuid.UUID `json:"ls_user_id"`
		ReadOnly      *bool      `json:"read_only"`
		RoleID        *uuid.UUID `json:"role_id"`
	}
	p, err := wsAdminBody(r, "Adding workspace members", &req)
	if err != nil {
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
	return s.changeJSON(w, &out, func(tx *bolt.Tx) error {
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
	return s.changeJSON(w, &out, func(tx *bolt.Tx) error {
		out = nil
		var res []audit.Resource
		for i := range reqs {
			v, what, err := s.addToWorkspace(tx, p, &reqs[i], i)
			if err != nil {
				return err
			}
			out = append(out, v)
			res = append(res, what)
		}
		return track.Success(tx, r, http.StatusOK, append(res, audit.Res(ws, "workspace"))...)
	})
}

// addToWorkspace brings the person of one batch entry (req, at index i)
// into the request's workspace: an organization member joins it, another
// email is invited into the organization and the workspace.
func (s *Store) addToWorkspace(tx *bolt.Tx, p *auth.Principal, req *inviteRequest, i int) (pendingView, audit.Resource, error) {
	if req.WorkspaceIDs != nil {
		return pendingView{}, audit.Resource{}, httpx.Invalid("value_error", "the workspace is the current one; leave workspace_ids out", "body", i, "workspace_ids")
	}
	// Workspace endpoints name the workspace role as role_id (or
	// workspace_role_id); they never carry an organization role,
	// which only organization:manage may grant. Invitees join the
	// organization as Organization User.
	if req.RoleID != nil && req.WorkspaceRoleID != nil {
		return pendingView{}, audit.Resource{}, httpx.Invalid("value_error", "a workspace invitation carries one workspace role: send role_id or workspace_role_id, not both; organization roles are granted through /api/v1/orgs/current/members", "body", i, "role_id")
	}
	if req.WorkspaceRoleID == nil {
		req.WorkspaceRoleID, req.RoleID = req.RoleID, nil
	}
	inv, err := s.checkInvite(tx, p, req, false, []any{"body", i})
	if err != nil {
		return pendingView{}, audit.Resource{}, err
	}
	ws := p.WorkspaceID
	inv.workspaces = []uuid.UUID{ws}
	u, err := memberByEmail(tx, p.OrgID, inv.email)
	if err != nil {
		return pendingView{}, audit.Resource{}, err
	}
	if u == nil {
		pm, err := s.invite(tx, p, inv)
		if err != nil {
			return pendingView{}, audit.Resource{}, err
		}
		return pendingOf(tx, pm), audit.Res(pm.ID, "pending_member"), nil
	}
	if _, in := u.WorkspaceRoles[ws]; in {
		return pendingView{}, audit.Resource{}, conflict("%s is already a member of workspace %s.", inv.email, ws)
	}
	u.WorkspaceRoles[ws] = inv.wsRole
	if err := putUser(tx, u); err != nil {
		return pendingView{}, audit.Resource{}, err
	}
	uid := u.ID
	v := pendingView{ID: u.ID, Email: u.Email, WorkspaceIDs: []uuid.UUID{ws}, AccessScope: "workspace",
		UserID: &uid, TenantID: &ws, OrganizationID: u.OrgID, CreatedAt: s.now()}
	v.RoleID, v.RoleName = roleRef(tx, inv.wsRole)
	v.WorkspaceRoleID = v.RoleID
	return v, audit.Res(u.ID, "user"), nil
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
	var req struct {
		ReadOnly *bool      `json:"read_only"`
		RoleID   *uuid.UUID `json:"role_id"`
	}
	p, err := wsAdminBody(r, "Changing workspace members", &req)
	if err != nil {
		return err
	}
	if req.RoleID == nil {
		return httpx.Invalid("missing", "Field required", "body", "role_id")
	}
	var out memberView
	return s.changeJSON(w, &out, func(tx *bolt.Tx) error {
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
}

// deleteWorkspaceMember: DELETE /api/v1/workspaces/current/members/{identity_id}
// (delete_workspace_member). The person stays in the organization.
func (s *Store) deleteWorkspaceMember(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	return s.changeAs(w, r, wsAdmin, "Removing workspace members", map[string]any{}, func(tx *bolt.Tx, p *auth.Principal) error {
		u, err := workspaceMember(tx, p, ps)
		if err != nil {
			return err
		}
		delete(u.WorkspaceRoles, p.WorkspaceID)
		return errors.Join(putUser(tx, u), track.Success(tx, r, http.StatusOK, audit.Res(u.ID, "user"), audit.Res(p.WorkspaceID, "workspace")))
	})
}

// deleteWorkspacePending: DELETE /api/v1/workspaces/current/members/{identity_id}/pending
// (delete_workspace_pending_member): the invitation no longer brings its
// invitee into this workspace; an invitation left with no workspace is
// withdrawn, since it came from workspace invitations only.
func (s *Store) deleteWorkspacePending(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	return s.changeAs(w, r, wsAdmin, "Withdrawing workspace invitations", map[string]any{}, func(tx *bolt.Tx, p *auth.Principal) error {
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
		return errors.Join(change, track.Success(tx, r, http.StatusOK, audit.Res(pm.ID, "pending_member"), audit.Res(p.WorkspaceID, "workspace")))
	})
}

// grantWorkspaceRole gives u role in workspace ws and writes the user with
// its audit event, in the caller's transaction.
func grantWorkspaceRole(tx *bolt.Tx, r *http.Request, u *User, ws uuid.UUID, role string) (memberView, error) {
	if u.WorkspaceRoles == nil {
		u.WorkspaceRoles = map[uuid.UUID]string{}
	}
	u.WorkspaceRoles[ws] = role
	out := memberOf(tx, u, &ws)
	return out, errors.Join(putUser(tx, u), track.Success(tx, r, http.StatusOK, audit.Res(u.ID, "user"), audit.Res(ws, "workspace")))
}
