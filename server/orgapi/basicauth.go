package orgapi

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
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
	passwords, err := preparePasswords(reqs)
	if err != nil {
		return err
	}
	var out []userWithPassword
	return s.changeJSON(w, &out, func(tx *bolt.Tx) error {
		out = nil
		var org Org
		if err := getOrg(tx, p.OrgID, &org); err != nil {
			return err
		}
		var res []audit.Resource
		for i := range reqs {
			v, err := s.addBasicAuthUser(tx, p, &org, &reqs[i], []any{"body", i}, passwords[i].hash)
			if err != nil {
				return err
			}
			v.Password = passwords[i].generated
			out = append(out, v)
			res = append(res, audit.Res(v.ID, "user"))
		}
		return track.Success(tx, r, http.StatusOK, res...)
	})
}

// preparedPassword is a new user's password, hashed; generated is the
// password in clear when Slipway made it up (to be shown once).
type preparedPassword struct {
	hash      *Password
	generated *string
}

// preparePasswords checks and hashes the passwords of a batch, generating
// those not given. It runs outside the transaction: hashing is
// deliberately slow and must not hold the database writer.
func preparePasswords(reqs []inviteRequest) ([]preparedPassword, error) {
	prep := make([]preparedPassword, len(reqs))
	for i := range reqs {
		if err := validatePassword(reqs[i].Password, "body", i, "password"); err != nil {
			return nil, err
		}
		pw := ""
		if reqs[i].Password != nil {
			pw = *reqs[i].Password
		} else {
			pw = auth.NewKey("pw")[3:27]
			g := pw
			prep[i].generated = &g
		}
		var err error
		if prep[i].hash, err = hashPassword(pw); err != nil {
			return nil, err
		}
	}
	return prep, nil
}

// addBasicAuthUser adds one user of a batch (req, located at loc) to org
// with the password pw, taking up the invitation of its email if any;
// without workspaces of its own it joins the organization's default one.
func (s *Store) addBasicAuthUser(tx *bolt.Tx, p *auth.Principal, org *Org, req *inviteRequest, loc []any, pw *Password) (userWithPassword, error) {
	inv, err := s.checkInvite(tx, p, req, true, loc)
	if err != nil {
		return userWithPassword{}, err
	}
	if loginTaken(tx, inv.email) {
		return userWithPassword{}, conflict("A user who logs in as %s already exists.", inv.email)
	}
	if u, err := memberByEmail(tx, p.OrgID, inv.email); err != nil {
		return userWithPassword{}, err
	} else if u != nil {
		return userWithPassword{}, conflict("%s is already a member of the organization.", inv.email)
	}
	if err := takeUpInvitation(tx, p, inv, req); err != nil {
		return userWithPassword{}, err
	}
	if req.WorkspaceIDs == nil && len(inv.workspaces) == 0 && workspaceInOrg(tx, org.ID, org.DefaultWorkspaceID) {
		inv.workspaces = []uuid.UUID{org.DefaultWorkspaceID}
	}
	now := s.now()
	u := User{ID: storage.NewID(), OrgID: p.OrgID, Email: inv.email, DisplayName: inv.email, OrgRole: inv.orgRole,
		WorkspaceRoles: map[uuid.UUID]string{}, Password: pw, CreatedAt: now}
	if inv.fullName != nil {
		u.DisplayName = *inv.fullName
	}
	for _, ws := range inv.workspaces {
		u.WorkspaceRoles[ws] = inv.wsRole
	}
	if err := errors.Join(putUser(tx, &u), putLogin(tx, &u)); err != nil {
		return userWithPassword{}, err
	}
	return userWithPassword{ID: u.ID, LSUserID: u.ID, CreatedAt: now, UpdatedAt: now, Email: u.Email, FullName: inv.fullName}, nil
}

// takeUpInvitation withdraws the invitation of inv's email, if any, and
// gives inv its roles and (still existing) workspaces where req names none.
func takeUpInvitation(tx *bolt.Tx, p *auth.Principal, inv *invitee, req *inviteRequest) error {
	pending, err := orgPending(tx, p.OrgID)
	if err != nil {
		return err
	}
	for j := range pending {
		pm := &pending[j]
		if pm.Email != inv.email {
			continue
		}
		if req.RoleID == nil {
			// Taking up an invitation grants its role: the caller
			// must be one who could have granted it.
			if err := mayGrantOrgRole(p, pm.OrgRole); err != nil {
				return err
			}
			inv.orgRole = pm.OrgRole
		}
		if req.WorkspaceRoleID == nil {
			inv.wsRole = pm.WorkspaceRole
		}
		if req.WorkspaceIDs == nil {
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
	return s.changeJSON(w, map[string]any{}, func(tx *bolt.Tx) error {
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
		return errors.Join(putUser(tx, u), track.Success(tx, r, http.StatusOK, audit.Res(u.ID, "user")))
	})
}
