package orgapi

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/server/auth"
	"slipway/server/httpx"
	"slipway/server/track"
	"slipway/storage"
)

// Store is the identity domain over the control-plane database.
type Store struct {
	DB *bolt.DB
	// Writer group-commits writes (shared with the control plane).
	Writer *storage.Committer
	Audit  *track.Recorder
	// Sealer encrypts workspace secrets under the master key.
	Sealer *storage.Sealer
	// DefaultAuditLogs is DEFAULT_ORG_FEATURE_CAN_USE_AUDIT_LOGS.
	DefaultAuditLogs bool
	Now              func() time.Time
	// Login throttles POST /api/v1/login; nil leaves it unthrottled.
	Login *LoginThrottle

	cache authCache
}

func (s *Store) update(fn func(*bolt.Tx) error) error {
	// Any identity write may change what a credential resolves to.
	defer s.cache.invalidate()
	if s.Writer == nil {
		return s.DB.Update(fn)
	}
	return s.Writer.Update(fn)
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

// Bootstrap creates the Default organization, workspace, admin user and an
// organization-admin key on an empty database. It returns the key (shown
// once) or "" when the database already had an organization. A non-empty
// fixedKey becomes the key, for automated installs.
func (s *Store) Bootstrap(fixedKey string) (string, error) {
	key := fixedKey
	if key == "" {
		key = auth.NewKey("slw_sk")
	}
	created := false
	err := s.DB.Update(func(tx *bolt.Tx) error {
		if hasOrgs(tx) {
			return nil
		}
		now := s.now()
		org := Org{ID: storage.NewID(), DisplayName: "Default", Plan: "enterprise", Config: map[string]any{}, CreatedAt: now}
		ws := Workspace{ID: storage.NewID(), OrgID: org.ID, DisplayName: "Default", CreatedAt: now}
		org.DefaultWorkspaceID = ws.ID
		user := User{ID: storage.NewID(), OrgID: org.ID, Email: "admin@localhost", DisplayName: "Administrator",
			OrgRole: auth.OrgAdmin, WorkspaceRoles: map[uuid.UUID]string{ws.ID: auth.WSAdmin}, CreatedAt: now}
		k := APIKey{ID: storage.NewID(), Kind: auth.KindServiceKey, Hash: auth.Hash(key), ShortKey: auth.ShortKey(key),
			Description: "Initial organization admin key", OrgID: org.ID, DefaultWorkspaceID: &ws.ID,
			UserID: user.ID, OrgRole: auth.OrgAdmin, CreatedAt: now}
		if err := putWorkspace(tx, &ws); err != nil {
			return err
		}
		if err := errors.Join(
			putOrg(tx, &org),
			putUser(tx, &user),
			putKey(tx, &k),
		); err != nil {
			return fmt.Errorf("bootstrap: %w", err)
		}
		created = true
		return nil
	})
	if err != nil || !created {
		return "", err
	}
	return key, nil
}

// Authenticate implements auth.Resolver.
func (s *Store) Authenticate(r *http.Request) (*auth.Principal, error) {
	key := r.Header.Get("X-Api-Key")
	if key == "" {
		key = httpx.BearerToken(r)
	}
	tenant, org := r.Header.Get("X-Tenant-Id"), r.Header.Get("X-Organization-Id")
	if key == "" && r.Header.Get("Authorization") == "" {
		// The dashboard's cookie, only when no header names a credential:
		// a script's explicit credential always wins over an ambient one.
		cookie, ws, err := auth.CookieCredential(r)
		if err != nil {
			return nil, err
		}
		key = cookie
		if tenant == "" {
			tenant = ws
		}
	}
	if key == "" {
		return nil, httpx.Unauthorized("Not authenticated: send an API key in the X-Api-Key header or a token as Authorization: Bearer.")
	}
	ck := keyOf(key, tenant, org)
	if p, ok := s.cache.get(ck, s.now()); ok {
		return p, nil
	}
	gen := s.cache.gen.Load()
	var p *auth.Principal
	var expires *time.Time
	err := s.DB.View(func(tx *bolt.Tx) error {
		var err error
		p, expires, err = s.principal(tx, key, tenant, org)
		return err
	})
	if err == nil {
		s.cache.put(ck, p, gen, expires)
	}
	return p, httpError(err)
}

func (s *Store) principal(tx *bolt.Tx, key, tenantHeader, orgHeader string) (*auth.Principal, *time.Time, error) {
	p, k, err := s.resolve(tx, key, tenantHeader, orgHeader)
	if err != nil {
		return nil, nil, err
	}
	return p, k.ExpiresAt, nil
}

func (s *Store) resolve(tx *bolt.Tx, key, tenantHeader, orgHeader string) (*auth.Principal, *APIKey, error) {
	if strings.HasPrefix(key, sessionPrefix) {
		return s.resolveSession(tx, key, tenantHeader, orgHeader)
	}
	k, err := keyByHash(tx, auth.Hash(key))
	if err != nil {
		return nil, nil, err
	}
	if k == nil {
		return nil, nil, httpx.Unauthorized("Invalid API key or token.")
	}
	if k.ExpiresAt != nil && !s.now().Before(*k.ExpiresAt) {
		return nil, nil, httpx.Unauthorized("This API key has expired.")
	}
	user, err := getUser(tx, k.UserID)
	if err != nil {
		return nil, nil, fmt.Errorf("user of api key %s: %w", k.ID, err)
	}
	cred := k.ID
	return s.place(tx, k, user, &cred, tenantHeader, orgHeader)
}

// resolveSession resolves a basic-auth login session. It is treated as a
// credential of the user without an id of its own, so events record a null
// credential_uid; its default workspace is the organization's default if
// the user has a role there, else the first workspace they have one in.
func (s *Store) resolveSession(tx *bolt.Tx, token, tenantHeader, orgHeader string) (*auth.Principal, *APIKey, error) {
	expired := httpx.Unauthorized("Invalid or expired session; log in again.")
	sess, err := getSession(tx, auth.Hash(token))
	if err != nil || !s.now().Before(sess.ExpiresAt) {
		return nil, nil, expired
	}
	user, err := getUser(tx, sess.UserID)
	if err != nil {
		return nil, nil, expired
	}
	var org Org
	if err := getOrg(tx, user.OrgID, &org); err != nil {
		return nil, nil, fmt.Errorf("organization of user %s: %w", user.ID, err)
	}
	k := APIKey{Kind: auth.KindSession, OrgID: user.OrgID, UserID: user.ID, ExpiresAt: &sess.ExpiresAt}
	var def *uuid.UUID
	if _, ok := user.WorkspaceRoles[org.DefaultWorkspaceID]; ok || user.OrgRole == auth.OrgAdmin {
		ws := org.DefaultWorkspaceID
		def = &ws
	} else {
		for _, id := range orgWorkspaceIDs(tx, org.ID) {
			if roleLevel(tx, user.WorkspaceRoles[id]) != "" {
				ws := id
				def = &ws
				break
			}
		}
	}
	k.DefaultWorkspaceID = def
	return s.place(tx, &k, user, nil, tenantHeader, orgHeader)
}

// place builds the principal of credential k of user: its organization
// role and the workspace the request acts in, with the role there.
func (s *Store) place(tx *bolt.Tx, k *APIKey, user *User, cred *uuid.UUID, tenantHeader, orgHeader string) (*auth.Principal, *APIKey, error) {
	if orgHeader != "" && !strings.EqualFold(orgHeader, k.OrgID.String()) {
		return nil, nil, denied("This credential does not belong to organization %s.", orgHeader)
	}
	p := &auth.Principal{OrgID: k.OrgID, UserID: k.UserID, CredentialID: cred, Kind: k.Kind, ReadOnly: k.ReadOnly, Service: user.Service}
	switch {
	case k.Kind == auth.KindPAT || k.Kind == auth.KindSession:
		p.OrgRole = user.OrgRole
	case k.WorkspaceID == nil:
		p.OrgRole = k.OrgRole
	}
	// The workspace: a workspace-scoped key is pinned to its own; other
	// credentials take X-Tenant-Id, else their default workspace.
	var ws uuid.UUID
	switch {
	case k.Kind == auth.KindServiceKey && k.WorkspaceID != nil:
		ws = *k.WorkspaceID
		if tenantHeader != "" && !strings.EqualFold(tenantHeader, ws.String()) {
			return nil, nil, denied("This API key is scoped to workspace %s and cannot act in workspace %s.", ws, tenantHeader)
		}
		p.WorkspaceID, p.WorkspaceRole = ws, roleLevel(tx, k.Role)
		return p, k, nil
	case tenantHeader != "":
		id, err := uuid.Parse(tenantHeader)
		if err != nil {
			return nil, nil, denied("X-Tenant-Id %q is not a workspace this credential can use.", tenantHeader)
		}
		ws = id
	case k.DefaultWorkspaceID != nil:
		ws = *k.DefaultWorkspaceID
	}
	if ws == uuid.Nil {
		return p, k, nil
	}
	if !workspaceInOrg(tx, k.OrgID, ws) {
		if tenantHeader == "" {
			// The default workspace was deleted: act without one.
			return p, k, nil
		}
		return nil, nil, denied("X-Tenant-Id %q is not a workspace this credential can use.", tenantHeader)
	}
	role := roleLevel(tx, user.WorkspaceRoles[ws])
	if k.Kind == auth.KindServiceKey {
		role = ""
	}
	if p.OrgRole == auth.OrgAdmin {
		role = auth.WSAdmin
	}
	if role == "" && !p.OrgManage() {
		return nil, nil, denied("This credential has no role in workspace %s.", ws)
	}
	p.WorkspaceID, p.WorkspaceRole = ws, role
	return p, k, nil
}
