package orgapi

import (
	"errors"
	"net/http"
	"net/mail"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/julienschmidt/httprouter"
	bolt "go.etcd.io/bbolt"

	"slipway/server/audit"
	"slipway/server/auth"
	"slipway/server/httpx"
	"slipway/server/track"
)

// User is a person or, with Service set, the identity behind a service key.
type User struct {
	ID             uuid.UUID            `json:"id"`
	OrgID          uuid.UUID            `json:"organization_id"`
	Email          string               `json:"email,omitempty"`
	DisplayName    string               `json:"display_name"`
	OrgRole        string               `json:"org_role"`
	WorkspaceRoles map[uuid.UUID]string `json:"workspace_roles"`
	Service        bool                 `json:"service"`
	// Password is set for basic-auth users, who log in with their email.
	Password  *Password `json:"password,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

func validateEmail(email string, loc ...any) (string, error) {
	e := strings.ToLower(strings.TrimSpace(email))
	a, err := mail.ParseAddress(e)
	if err != nil || a.Address != e || len(e) > 254 {
		return "", httpx.Invalid("value_error", "value is not a valid email address", loc...)
	}
	return e, nil
}

// memberByEmail finds a person (not a service identity) of org by email.
func memberByEmail(tx *bolt.Tx, org uuid.UUID, email string) (*User, error) {
	users, err := orgUsers(tx, org)
	if err != nil {
		return nil, err
	}
	for i := range users {
		if !users[i].Service && strings.EqualFold(users[i].Email, email) {
			return &users[i], nil
		}
	}
	return nil, nil
}

// orgMember loads the member named by the path parameter identity_id.
func orgMember(tx *bolt.Tx, org uuid.UUID, ps httprouter.Params) (*User, error) {
	id, err := httpx.ParseID(ps.ByName("identity_id"), "path", "identity_id")
	if err != nil {
		return nil, err
	}
	u, err := getUser(tx, id)
	if err != nil || u.OrgID != org || u.Service {
		return nil, notFound("Member %s not found.", id)
	}
	return u, nil
}

// memberView is the hosted OrgMemberIdentity / MemberIdentity shape. A
// member's identity id is its user id: a Slipway user belongs to one
// organization.
type memberView struct {
	ID             uuid.UUID   `json:"id"`
	OrganizationID uuid.UUID   `json:"organization_id"`
	TenantID       *uuid.UUID  `json:"tenant_id"`
	CreatedAt      time.Time   `json:"created_at"`
	UserID         uuid.UUID   `json:"user_id"`
	LSUserID       uuid.UUID   `json:"ls_user_id"`
	ReadOnly       bool        `json:"read_only"`
	RoleID         *uuid.UUID  `json:"role_id"`
	RoleName       *string     `json:"role_name"`
	AccessScope    string      `json:"access_scope"`
	Email          string      `json:"email"`
	FullName       string      `json:"full_name"`
	DisplayName    string      `json:"display_name"`
	LoginMethods   []string    `json:"linked_login_methods"`
	IsDisabled     bool        `json:"is_disabled"`
	OrgRoleID      *uuid.UUID  `json:"org_role_id"`
	OrgRoleName    *string     `json:"org_role_name"`
	TenantIDs      []uuid.UUID `json:"tenant_ids,omitempty"`
}

func memberOf(tx *bolt.Tx, u *User, ws *uuid.UUID) memberView {
	v := memberView{ID: u.ID, OrganizationID: u.OrgID, CreatedAt: u.CreatedAt, UserID: u.ID, LSUserID: u.ID,
		Email: u.Email, FullName: u.DisplayName, DisplayName: u.DisplayName, LoginMethods: []string{},
		AccessScope: "organization", TenantIDs: []uuid.UUID{}}
	if u.Password != nil {
		v.LoginMethods = append(v.LoginMethods, "email-password")
	}
	if r, ok := builtinByName(u.OrgRole); ok {
		v.OrgRoleID, v.OrgRoleName = &r.ID, &r.DisplayName
	}
	for id := range u.WorkspaceRoles {
		v.TenantIDs = append(v.TenantIDs, id)
	}
	if ws != nil {
		v.TenantID, v.AccessScope, v.TenantIDs = ws, "workspace", nil
		v.RoleID, v.RoleName = roleRef(tx, u.WorkspaceRoles[*ws])
	} else {
		v.RoleID, v.RoleName = v.OrgRoleID, v.OrgRoleName
	}
	return v
}

func uuidStrings(ids []uuid.UUID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}

type memberPatch struct {
	Password *string    `json:"password"`
	FullName *string    `json:"full_name"`
	RoleID   *uuid.UUID `json:"role_id"`
}

func (m *memberPatch) validate() error {
	if err := validatePassword(m.Password, "body", "password"); err != nil {
		return err
	}
	if m.FullName != nil && (strings.TrimSpace(*m.FullName) == "" || len(*m.FullName) > 200) {
		return httpx.Invalid("value_error", "full_name must be 1 to 200 characters", "body", "full_name")
	}
	return nil
}

// orgAdmins counts the people holding Organization Admin.
func orgAdmins(tx *bolt.Tx, org uuid.UUID) (int, error) {
	users, err := orgUsers(tx, org)
	n := 0
	for _, u := range users {
		if !u.Service && u.OrgRole == auth.OrgAdmin {
			n++
		}
	}
	return n, err
}

// updateOrgMember: PATCH /api/v1/orgs/current/members/{identity_id}
// (update_org_member): the organization role of anyone, the name and
// password of basic-auth users.
func (s *Store) updateOrgMember(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	var req memberPatch
	p, err := managerBody(r, "Changing members", &req)
	if err != nil {
		return err
	}
	if err := req.validate(); err != nil {
		return err
	}
	var pw *Password
	if req.Password != nil {
		var err error
		if pw, err = hashPassword(*req.Password); err != nil {
			return err
		}
	}
	var out memberView
	return s.changeJSON(w, &out, func(tx *bolt.Tx) error {
		u, err := orgMember(tx, p.OrgID, ps)
		if err != nil {
			return err
		}
		if req.RoleID != nil {
			role, err := orgRoleFor(req.RoleID, "", "body", "role_id")
			if err != nil {
				return err
			}
			if (role == auth.OrgAdmin || u.OrgRole == auth.OrgAdmin) && role != u.OrgRole && p.OrgRole != auth.OrgAdmin {
				return denied("Only an Organization Admin can grant or take away the Organization Admin role.")
			}
			if u.OrgRole == auth.OrgAdmin && role != auth.OrgAdmin {
				if n, err := orgAdmins(tx, p.OrgID); err != nil {
					return err
				} else if n <= 1 {
					return refused("%s is the organization's last Organization Admin.", u.DisplayName)
				}
			}
			u.OrgRole = role
		}
		if (req.Password != nil || req.FullName != nil) && u.Password == nil {
			return refused("Only basic-auth users have a name and password kept by Slipway.")
		}
		if pw != nil {
			u.Password = pw
			if err := dropSessions(tx, u.ID); err != nil {
				return err
			}
		}
		if req.FullName != nil {
			u.DisplayName = strings.TrimSpace(*req.FullName)
		}
		out = memberOf(tx, u, nil)
		return errors.Join(putUser(tx, u), track.Success(tx, r, http.StatusOK, audit.Res(u.ID, "user")))
	})
}

// deleteOrgMember: DELETE /api/v1/orgs/current/members/{identity_id}
// (delete_org_member). The member's personal access tokens and sessions
// go with them.
func (s *Store) deleteOrgMember(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	return s.changeAs(w, r, orgManager, "Removing members", map[string]any{}, func(tx *bolt.Tx, p *auth.Principal) error {
		u, err := orgMember(tx, p.OrgID, ps)
		if err != nil {
			return err
		}
		if u.OrgRole == auth.OrgAdmin {
			if p.OrgRole != auth.OrgAdmin {
				return denied("Only an Organization Admin can remove an Organization Admin.")
			}
			if n, err := orgAdmins(tx, p.OrgID); err != nil {
				return err
			} else if n <= 1 {
				return refused("%s is the organization's last Organization Admin.", u.DisplayName)
			}
		}
		if err := deleteKeysWhere(tx, func(k *APIKey) bool { return k.UserID == u.ID }); err != nil {
			return err
		}
		return errors.Join(removeUser(tx, u), track.Success(tx, r, http.StatusOK, audit.Res(u.ID, "user")))
	})
}

// listOrgMembers: GET /api/v1/orgs/current/members (OrganizationMembers).
// Everyone with an organization role (organization:read) may list the
// members; a workspace-scoped key has none and sees only its workspace's.
func (s *Store) listOrgMembers(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	if p.OrgRole == "" {
		return denied("Listing the organization's members requires an organization role; use GET /api/v1/workspaces/current/members.")
	}
	out := map[string]any{"organization_id": p.OrgID}
	return s.viewJSON(w, &out, func(tx *bolt.Tx) error {
		members, pending, err := memberList(tx, p.OrgID, nil, p.OrgManage())
		out["members"], out["pending"] = members, pending
		return err
	})
}

// hasWorkspace reports whether u has a role in workspace ws.
func hasWorkspace(u *User, ws uuid.UUID) bool {
	_, in := u.WorkspaceRoles[ws]
	return in
}

// memberList lists the people of org (of its workspace ws, unless nil)
// and, with invitations set, the invitations (into ws, unless nil).
func memberList(tx *bolt.Tx, org uuid.UUID, ws *uuid.UUID, invitations bool) ([]memberView, []pendingView, error) {
	users, err := orgUsers(tx, org)
	if err != nil {
		return nil, nil, err
	}
	members := []memberView{}
	for i := range users {
		if !users[i].Service && (ws == nil || hasWorkspace(&users[i], *ws)) {
			members = append(members, memberOf(tx, &users[i], ws))
		}
	}
	pending := []pendingView{}
	if !invitations {
		return members, pending, nil
	}
	pms, err := orgPending(tx, org)
	if err != nil {
		return nil, nil, err
	}
	for i := range pms {
		if ws == nil || contains(uuidStrings(pms[i].WorkspaceIDs), ws.String()) {
			pending = append(pending, pendingOf(tx, &pms[i]))
		}
	}
	return members, pending, nil
}
