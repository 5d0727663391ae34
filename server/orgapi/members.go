package orgapi

import (
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
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
	"slipway/storage"
)

// Password is a basic-auth user's password, stored as PBKDF2-HMAC-SHA512
// (the OWASP-recommended iteration count) so a copy of the database does
// not give passwords away. Only users added with a password have one.
type Password struct {
	Salt []byte `json:"salt"`
	Iter int    `json:"iter"`
	Hash []byte `json:"hash"`
}

const passwordIter = 210_000

// decoy is checked against when the email is unknown; it matches nothing
// (its hash is not the PBKDF2 of any password one would send).
var decoy = &Password{Salt: make([]byte, 16), Iter: passwordIter, Hash: make([]byte, 32)}

func hashPassword(pw string) (*Password, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return nil, fmt.Errorf("password salt: %w", err)
	}
	h, err := pbkdf2.Key(sha512.New, pw, salt, passwordIter, 32)
	if err != nil {
		return nil, fmt.Errorf("password hash: %w", err)
	}
	return &Password{Salt: salt, Iter: passwordIter, Hash: h}, nil
}

func (p *Password) matches(pw string) bool {
	h, err := pbkdf2.Key(sha512.New, pw, p.Salt, p.Iter, len(p.Hash))
	return err == nil && subtle.ConstantTimeCompare(h, p.Hash) == 1
}

func validatePassword(pw *string, loc ...any) error {
	if pw == nil {
		return nil
	}
	if n := len([]rune(*pw)); n < 12 || len(*pw) > 128 {
		return httpx.Invalid("value_error", "password must be 12 to 128 characters", loc...)
	}
	return nil
}

func validateEmail(email string, loc ...any) (string, error) {
	e := strings.ToLower(strings.TrimSpace(email))
	a, err := mail.ParseAddress(e)
	if err != nil || a.Address != e || len(e) > 254 {
		return "", httpx.Invalid("value_error", "value is not a valid email address", loc...)
	}
	return e, nil
}

// Session is a basic-auth login; only the hash of its token is stored.
type Session struct {
	UserID    uuid.UUID `json:"user_id"`
	OrgID     uuid.UUID `json:"organization_id"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// SessionTTL is how long a login session lasts.
const SessionTTL = 24 * time.Hour

const sessionPrefix = "slw_ss_"

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
	Email           *string      `json:"email"`
	ReadOnly        *bool        `json:"read_only"`
	RoleID          *uuid.UUID   `json:"role_id"`
	WorkspaceIDs    *[]uuid.UUID `json:"workspace_ids"`
	WorkspaceRoleID *uuid.UUID   `json:"workspace_role_id"`
	Password        *string      `json:"password"`
	FullName        *string      `json:"full_name"`
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

func uuidStrings(ids []uuid.UUID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
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
			return audit.Success(tx, r, http.StatusOK, res...)
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

// userWithPassword is the hosted UserWithPassword shape; Password is set
// only when Slipway generated it (shown once, never stored in clear).
type userWithPassword struct {
	ID        uuid.UUID `json:"id"`
	LSUserID  uuid.UUID `json:"ls_user_id"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	Email     string    `json:"email"`
	FullName  *string   `json:"full_name"`
	AvatarURL *string   `json:"avatar_url"`
	Password  *string   `json:"password,omitempty"`
}

// addBasicAuthUsers: POST /api/v1/orgs/current/members/basic/batch
// (add_basic_auth_users_to_org). Each user gets a password (generated when
// none is given) to log in with at POST /api/v1/login. An invitation for
// the same email is taken up: its roles and workspaces apply unless the
// request names others.
func (s *Store) addBasicAuthUsers(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	if err := orgManager(p, "Adding members"); err != nil {
		return err
	}
	reqs, err := decodeBatch(r)
	if err != nil {
		return err
	}
	// Hash outside the transaction: it is deliberately slow and must not
	// hold the database writer.
	type prepared struct {
		pw        *Password
		generated *string
	}
	prep := make([]prepared, len(reqs))
	for i := range reqs {
		if err := validatePassword(reqs[i].Password, "body", i, "password"); err != nil {
			return err
		}
		pw := ""
		if reqs[i].Password != nil {
			pw = *reqs[i].Password
		} else {
			pw = auth.NewKey("pw")[3:27]
			g := pw
			prep[i].generated = &g
		}
		if prep[i].pw, err = hashPassword(pw); err != nil {
			return err
		}
	}
	var out []userWithPassword
	err = s.update(func(tx *bolt.Tx) error {
		out = nil
		var org Org
		if err := getOrg(tx, p.OrgID, &org); err != nil {
			return err
		}
		var res []audit.Resource
		for i := range reqs {
			inv, err := s.checkInvite(tx, p, &reqs[i], true, []any{"body", i})
			if err != nil {
				return err
			}
			if loginTaken(tx, inv.email) {
				return conflict("A user who logs in as %s already exists.", inv.email)
			}
			if u, err := memberByEmail(tx, p.OrgID, inv.email); err != nil {
				return err
			} else if u != nil {
				return conflict("%s is already a member of the organization.", inv.email)
			}
			pending, err := orgPending(tx, p.OrgID)
			if err != nil {
				return err
			}
			for j := range pending {
				pm := &pending[j]
				if pm.Email != inv.email {
					continue
				}
				if reqs[i].RoleID == nil {
					// Taking up an invitation grants its role: the caller
					// must be one who could have granted it.
					if err := mayGrantOrgRole(p, pm.OrgRole); err != nil {
						return err
					}
					inv.orgRole = pm.OrgRole
				}
				if reqs[i].WorkspaceRoleID == nil {
					inv.wsRole = pm.WorkspaceRole
				}
				if reqs[i].WorkspaceIDs == nil {
					// Workspaces deleted since the invitation are dropped.
					inv.workspaces = nil
					for _, ws := range pm.WorkspaceIDs {
						if workspaceInOrg(tx, p.OrgID, ws) {
							inv.workspaces = append(inv.workspaces, ws)
						}
					}
				}
				if err := deletePending(tx, pm); err != nil {
					return err
				}
			}
			if reqs[i].WorkspaceIDs == nil && len(inv.workspaces) == 0 && workspaceInOrg(tx, org.ID, org.DefaultWorkspaceID) {
				inv.workspaces = []uuid.UUID{org.DefaultWorkspaceID}
			}
			now := s.now()
			u := User{ID: storage.NewID(), OrgID: p.OrgID, Email: inv.email, DisplayName: inv.email, OrgRole: inv.orgRole,
				WorkspaceRoles: map[uuid.UUID]string{}, Password: prep[i].pw, CreatedAt: now}
			if inv.fullName != nil {
				u.DisplayName = *inv.fullName
			}
			for _, ws := range inv.workspaces {
				u.WorkspaceRoles[ws] = inv.wsRole
			}
			if err := errors.Join(putUser(tx, &u), putLogin(tx, &u)); err != nil {
				return err
			}
			out = append(out, userWithPassword{ID: u.ID, LSUserID: u.ID, CreatedAt: now, UpdatedAt: now, Email: u.Email,
				FullName: inv.fullName, Password: prep[i].generated})
			res = append(res, audit.Res(u.ID, "user"))
		}
		return audit.Success(tx, r, http.StatusOK, res...)
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
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
	p := auth.From(r)
	if err := orgManager(p, "Changing members"); err != nil {
		return err
	}
	var req memberPatch
	if err := httpx.DecodeJSON(r, &req, true); err != nil {
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
	err := s.update(func(tx *bolt.Tx) error {
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
		return errors.Join(putUser(tx, u), audit.Success(tx, r, http.StatusOK, audit.Res(u.ID, "user")))
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// deleteOrgMember: DELETE /api/v1/orgs/current/members/{identity_id}
// (delete_org_member). The member's personal access tokens and sessions
// go with them.
func (s *Store) deleteOrgMember(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p := auth.From(r)
	if err := orgManager(p, "Removing members"); err != nil {
		return err
	}
	err := s.update(func(tx *bolt.Tx) error {
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
		return errors.Join(removeUser(tx, u), audit.Success(tx, r, http.StatusOK, audit.Res(u.ID, "user")))
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{})
	return nil
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
	p := auth.From(r)
	if err := orgManager(p, "Withdrawing invitations"); err != nil {
		return err
	}
	err := s.update(func(tx *bolt.Tx) error {
		pm, err := pendingByPath(tx, p.OrgID, ps)
		if err != nil {
			return err
		}
		return errors.Join(deletePending(tx, pm), audit.Success(tx, r, http.StatusOK, audit.Res(pm.ID, "pending_member")))
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{})
	return nil
}

// updateBasicAuthUser: PATCH /api/v1/orgs/members/basic
// (update_basic_auth_user) — the caller's own name or password.
func (s *Store) updateBasicAuthUser(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	var req struct {
		Password *string `json:"password"`
		FullName *string `json:"full_name"`
	}
	if err := httpx.DecodeJSON(r, &req, true); err != nil {
		return err
	}
	patch := memberPatch{Password: req.Password, FullName: req.FullName}
	if err := patch.validate(); err != nil {
		return err
	}
	var pw *Password
	if req.Password != nil {
		var err error
		if pw, err = hashPassword(*req.Password); err != nil {
			return err
		}
	}
	err := s.update(func(tx *bolt.Tx) error {
		u, err := getUser(tx, p.UserID)
		if err != nil {
			return fmt.Errorf("user %s: %w", p.UserID, err)
		}
		if u.Password == nil {
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
		return errors.Join(putUser(tx, u), audit.Success(tx, r, http.StatusOK, audit.Res(u.ID, "user")))
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{})
	return nil
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
	err := s.DB.View(func(tx *bolt.Tx) error {
		users, err := orgUsers(tx, p.OrgID)
		if err != nil {
			return err
		}
		members := []memberView{}
		for i := range users {
			if !users[i].Service {
				members = append(members, memberOf(tx, &users[i], nil))
			}
		}
		pending := []pendingView{}
		if p.OrgManage() {
			pms, err := orgPending(tx, p.OrgID)
			if err != nil {
				return err
			}
			for i := range pms {
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

// login: POST /api/v1/login with HTTP Basic credentials or a JSON body
// {"email", "password"}. The session token it returns is used as
// Authorization: Bearer; events of such requests have a null
// credential_uid, as the spec says of session authentication.
func (s *Store) login(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	email, password, ok := r.BasicAuth()
	if !ok {
		var req struct {
			Email    *string `json:"email"`
			Password *string `json:"password"`
		}
		if err := httpx.DecodeJSON(r, &req, true); err != nil {
			return err
		}
		if req.Email == nil {
			return httpx.Invalid("missing", "Field required", "body", "email")
		}
		if req.Password == nil {
			return httpx.Invalid("missing", "Field required", "body", "password")
		}
		email, password = *req.Email, *req.Password
	}
	account := strings.ToLower(strings.TrimSpace(email))
	// The throttle decides before the account is looked up, so a
	// throttled answer takes as long whether or not the email exists.
	var pass *Pass
	if s.Login != nil {
		var wait time.Duration
		if pass, wait = s.Login.Attempt(s.clientAddress(r), account); pass == nil {
			return s.throttled(w, r, account, wait)
		}
	}
	invalid := httpx.Unauthorized("Invalid email or password.")
	var u *User
	err := s.DB.View(func(tx *bolt.Tx) error {
		var err error
		u, err = userByLogin(tx, account)
		return err
	})
	if errors.Is(err, errNoAccount) || err == nil && u.Password == nil {
		// Spend the time a password check takes, so the answer's timing
		// does not tell which emails have an account.
		decoy.matches(password)
		return invalid
	}
	if err != nil {
		return err
	}
	if !u.Password.matches(password) {
		return invalid
	}
	if pass != nil {
		pass.Succeeded()
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("session token: %w", err)
	}
	token := sessionPrefix + hex.EncodeToString(b[:])
	now := s.now()
	sess := Session{UserID: u.ID, OrgID: u.OrgID, CreatedAt: now, ExpiresAt: now.Add(SessionTTL)}
	err = s.update(func(tx *bolt.Tx) error {
		// The user may have been removed since the password was checked.
		if !userExists(tx, u.ID) {
			return invalid
		}
		return putSession(tx, auth.Hash(token), &sess)
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"access_token": token, "token_type": "bearer",
		"expires_at": sess.ExpiresAt, "user_id": u.ID, "organization_id": u.OrgID})
	return nil
}

// logout: POST /api/v1/logout ends the session used for the request.
func (s *Store) logout(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	if p.Kind != auth.KindSession {
		return refused("Only a login session can be logged out; revoke API keys instead.")
	}
	token := httpx.BearerToken(r)
	if token == "" {
		// Authenticated by the dashboard's cookie (auth.CookieCredential).
		if c, err := r.Cookie(auth.CredentialCookie); err == nil {
			token = c.Value
		}
	}
	if err := s.update(func(tx *bolt.Tx) error { return deleteSession(tx, auth.Hash(token)) }); err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{})
	return nil
}
