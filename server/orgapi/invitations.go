package orgapi

import (
	"errors"
	"fmt"
	"net/http"
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

// PendingMember is an invitation into the organization (and workspaces)
// that nobody has taken up yet. Slipway sends no mail: adding a basic-auth
// user with the invited email takes the invitation up, with its roles.
type PendingMember struct {
	ID            uuid.UUID   `json:"id"`
	OrgID         uuid.UUID   `json:"organization_id"`
	Email         string      `json:"email"`
	OrgRole       string      `json:"org_role"`
	WorkspaceIDs  []uuid.UUID `json:"workspace_ids"`
	WorkspaceRole string      `json:"workspace_role"`
	FullName      *string     `json:"full_name"`
	CreatedAt     time.Time   `json:"created_at"`
}

// pendingView is the hosted PendingIdentity shape.
type pendingView struct {
	ID              uuid.UUID   `json:"id"`
	Email           string      `json:"email"`
	ReadOnly        bool        `json:"read_only"`
	RoleID          *uuid.UUID  `json:"role_id"`
	RoleName        *string     `json:"role_name"`
	WorkspaceIDs    []uuid.UUID `json:"workspace_ids"`
	WorkspaceRoleID *uuid.UUID  `json:"workspace_role_id"`
	FullName        *string     `json:"full_name"`
	AccessScope     string      `json:"access_scope"`
	UserID          *uuid.UUID  `json:"user_id"`
	TenantID        *uuid.UUID  `json:"tenant_id"`
	OrganizationID  uuid.UUID   `json:"organization_id"`
	CreatedAt       time.Time   `json:"created_at"`
	OrgRoleID       *uuid.UUID  `json:"org_role_id"`
	OrgRoleName     *string     `json:"org_role_name"`
}

func pendingOf(tx *bolt.Tx, pm *PendingMember) pendingView {
	v := pendingView{ID: pm.ID, Email: pm.Email, WorkspaceIDs: append([]uuid.UUID{}, pm.WorkspaceIDs...), FullName: pm.FullName,
		AccessScope: "organization", OrganizationID: pm.OrgID, CreatedAt: pm.CreatedAt}
	if r, ok := builtinByName(pm.OrgRole); ok {
		v.OrgRoleID, v.OrgRoleName = &r.ID, &r.DisplayName
	}
	v.WorkspaceRoleID, _ = roleRef(tx, pm.WorkspaceRole)
	v.RoleID, v.RoleName = roleRef(tx, pm.WorkspaceRole)
	if len(pm.WorkspaceIDs) > 0 {
		ws := pm.WorkspaceIDs[0]
		v.TenantID = &ws
	}
	return v
}

// inviteRequest is PendingIdentityCreate (and BasicAuthMemberCreate, which
// adds user_id and ls_user_id, accepted and ignored: Slipway makes its own).
type inviteRequest struct {
	Email           *string      `json:"email" required:"true" description:"The user's email address, which they log in with."`
	ReadOnly        *bool        `json:"read_only" description:"A member who may only read, whatever the roles."`
	RoleID          *uuid.UUID   `json:"role_id" description:"The organization role's id from GET /api/v1/orgs/current/roles: Organization Admin, Operator, User (the default) or Viewer. Only an Admin may grant Admin."`
	WorkspaceIDs    *[]uuid.UUID `json:"workspace_ids" description:"The workspaces the user joins (default: the organization's default workspace)."`
	WorkspaceRoleID *uuid.UUID   `json:"workspace_role_id" description:"The role in those workspaces, an id from GET /api/v1/orgs/current/roles: Admin (deploys, manages keys and members), Editor (deploys and runs agents), Viewer (the default: reads deployments, assistants and threads, cannot deploy or start runs) or a custom workspace role."`
	Password        *string      `json:"password" description:"Basic-auth users only: the password (default: one is generated and answered once)."`
	FullName        *string      `json:"full_name" description:"The user's full name."`
	UserID          *uuid.UUID   `json:"user_id"`
	LSUserID        *uuid.UUID   `json:"ls_user_id"`
}

// invitee is a validated inviteRequest.
type invitee struct {
	email, orgRole, wsRole string
	workspaces             []uuid.UUID
	password               *string
	fullName               *string
}

// checkInvite validates one invitation (loc prefix locates it in a batch).
// An Organization Operator may not hand out the Admin role: operators
// manage the organization but do not own it.
func (s *Store) checkInvite(tx *bolt.Tx, p *auth.Principal, req *inviteRequest, basic bool, loc []any) (*invitee, error) {
	at := func(f ...any) []any { return append(append([]any{}, loc...), f...) }
	if req.Email == nil {
		return nil, httpx.Invalid("missing", "Field required", at("email")...)
	}
	email, err := validateEmail(*req.Email, at("email")...)
	if err != nil {
		return nil, err
	}
	if !basic && req.Password != nil {
		return nil, httpx.Invalid("value_error", "an invitation carries no password; add basic-auth users with POST /api/v1/orgs/current/members/basic/batch", at("password")...)
	}
	if err := validatePassword(req.Password, at("password")...); err != nil {
		return nil, err
	}
	if req.FullName != nil && len(*req.FullName) > 200 {
		return nil, httpx.Invalid("string_too_long", "full_name must be at most 200 characters", at("full_name")...)
	}
	orgRole, err := orgRoleFor(req.RoleID, auth.OrgUser, at("role_id")...)
	if err != nil {
		return nil, err
	}
	if req.RoleID != nil {
		if err := mayGrantOrgRole(p, orgRole); err != nil {
			return nil, err
		}
	}
	wsRole, err := workspaceRoleFor(tx, p.OrgID, req.WorkspaceRoleID, auth.WSViewer, at("workspace_role_id")...)
	if err != nil {
		return nil, err
	}
	inv := &invitee{email: email, orgRole: orgRole, wsRole: wsRole, password: req.Password, fullName: req.FullName}
	if req.WorkspaceIDs != nil {
		for i, ws := range *req.WorkspaceIDs {
			if !workspaceInOrg(tx, p.OrgID, ws) {
				return nil, httpx.Invalid("value_error", fmt.Sprintf("workspace %s is not a workspace of this organization", ws), at("workspace_ids", i)...)
			}
			if !contains(uuidStrings(inv.workspaces), ws.String()) {
				inv.workspaces = append(inv.workspaces, ws)
			}
		}
	}
	return inv, nil
}

// mayGrantOrgRole refuses to let p hand out the organization role role:
// organization roles come only from callers with organization:manage, and
// Organization Admin only from an Admin (operators manage the
// organization but do not own it). Workspace Admins manage their
// workspace, never the organization.
func mayGrantOrgRole(p *auth.Principal, role string) error {
	if !p.OrgManage() || p.ReadOnly {
		return denied("Granting an organization role requires organization:manage; workspace routes grant workspace roles only.")
	}
	if role == auth.OrgAdmin && p.OrgRole != auth.OrgAdmin {
		return denied("Only an Organization Admin can grant the Organization Admin role.")
	}
	return nil
}

// invite records one invitation, refusing an email that is already a
// member or invited.
func (s *Store) invite(tx *bolt.Tx, p *auth.Principal, inv *invitee) (*PendingMember, error) {
	if u, err := memberByEmail(tx, p.OrgID, inv.email); err != nil {
		return nil, err
	} else if u != nil {
		return nil, conflict("%s is already a member of the organization.", inv.email)
	}
	pending, err := orgPending(tx, p.OrgID)
	if err != nil {
		return nil, err
	}
	for _, pm := range pending {
		if pm.Email == inv.email {
			return nil, conflict("%s has already been invited.", inv.email)
		}
	}
	pm := PendingMember{ID: storage.NewID(), OrgID: p.OrgID, Email: inv.email, OrgRole: inv.orgRole,
		WorkspaceIDs: inv.workspaces, WorkspaceRole: inv.wsRole, FullName: inv.fullName, CreatedAt: s.now()}
	if pm.WorkspaceIDs == nil {
		pm.WorkspaceIDs = []uuid.UUID{}
	}
	return &pm, putPending(tx, &pm)
}

const maxBatch = 500

func decodeBatch(r *http.Request) ([]inviteRequest, error) {
	reqs, err := decodeList[inviteRequest](r)
	if err != nil {
		return nil, err
	}
	if len(reqs) == 0 || len(reqs) > maxBatch {
		return nil, httpx.Invalid("value_error", fmt.Sprintf("send 1 to %d entries", maxBatch), "body")
	}
	return reqs, nil
}

// inviteHandler: POST /api/v1/orgs/current/members (invite_user_to_org) and
// .../members/batch (invite_users_to_org_batch).
func (s *Store) inviteHandler(batch bool) httpx.Handle {
	return func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
		p := auth.From(r)
		if err := orgManager(p, "Inviting members"); err != nil {
			return err
		}
		var reqs []inviteRequest
		if batch {
			var err error
			if reqs, err = decodeBatch(r); err != nil {
				return err
			}
		} else {
			var req inviteRequest
			if err := httpx.DecodeJSON(r, &req, true); err != nil {
				return err
			}
			reqs = []inviteRequest{req}
		}
		var out []pendingView
		err := s.update(func(tx *bolt.Tx) error {
			out = nil
			var res []audit.Resource
			for i := range reqs {
				loc := []any{"body"}
				if batch {
					loc = append(loc, i)
				}
				inv, err := s.checkInvite(tx, p, &reqs[i], false, loc)
				if err != nil {
					return err
				}
				pm, err := s.invite(tx, p, inv)
				if err != nil {
					return err
				}
				out = append(out, pendingOf(tx, pm))
				res = append(res, audit.Res(pm.ID, "pending_member"))
			}
			return track.Success(tx, r, http.StatusOK, res...)
		})
		if err != nil {
			return err
		}
		if batch {
			httpx.WriteJSON(w, http.StatusOK, out)
		} else {
			httpx.WriteJSON(w, http.StatusOK, out[0])
		}
		return nil
	}
}

// pendingByPath loads the invitation named by identity_id.
func pendingByPath(tx *bolt.Tx, org uuid.UUID, ps httprouter.Params) (*PendingMember, error) {
	id, err := httpx.ParseID(ps.ByName("identity_id"), "path", "identity_id")
	if err != nil {
		return nil, err
	}
	pm, err := getPending(tx, id)
	if err != nil || pm.OrgID != org {
		return nil, notFound("Pending member %s not found.", id)
	}
	return pm, nil
}

// deleteOrgPending: DELETE /api/v1/orgs/current/members/{identity_id}/pending
// (delete_org_pending_member).
func (s *Store) deleteOrgPending(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	return s.changeAs(w, r, orgManager, "Withdrawing invitations", map[string]any{}, func(tx *bolt.Tx, p *auth.Principal) error {
		pm, err := pendingByPath(tx, p.OrgID, ps)
		if err != nil {
			return err
		}
		return errors.Join(deletePending(tx, pm), track.Success(tx, r, http.StatusOK, audit.Res(pm.ID, "pending_member")))
	})
}
