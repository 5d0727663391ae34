package orgapi

import (
	"errors"
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

// APIKey is a stored credential. Only the hash of the key is kept.
type APIKey struct {
	ID                 uuid.UUID  `json:"id"`
	Kind               string     `json:"kind"`
	Hash               []byte     `json:"hash"`
	ShortKey           string     `json:"short_key"`
	Description        string     `json:"description"`
	ReadOnly           bool       `json:"read_only"`
	OrgID              uuid.UUID  `json:"organization_id"`
	WorkspaceID        *uuid.UUID `json:"workspace_id"` // nil: organization-scoped
	DefaultWorkspaceID *uuid.UUID `json:"default_workspace_id"`
	UserID             uuid.UUID  `json:"user_id"`
	Role               string     `json:"role"`     // workspace role of a workspace-scoped service key
	OrgRole            string     `json:"org_role"` // organization role of an organization-scoped service key
	CreatedAt          time.Time  `json:"created_at"`
	ExpiresAt          *time.Time `json:"expires_at"`
}

type keyCreateRequest struct {
	Description        *string    `json:"description"`
	ReadOnly           *bool      `json:"read_only"`
	ExpiresAt          *time.Time `json:"expires_at"`
	Workspaces         []string   `json:"workspaces"`
	RoleID             *string    `json:"role_id"`
	OrgRoleID          *string    `json:"org_role_id"`
	DefaultWorkspaceID *uuid.UUID `json:"default_workspace_id"`
}

// keyResponse is APIKeyGetResponse; Key is set only in the creation response.
type keyResponse struct {
	ID                   uuid.UUID  `json:"id"`
	CreatedAt            time.Time  `json:"created_at"`
	ShortKey             string     `json:"short_key"`
	Description          string     `json:"description"`
	ReadOnly             bool       `json:"read_only"`
	LastUsedAt           *time.Time `json:"last_used_at"`
	ExpiresAt            *time.Time `json:"expires_at"`
	WorkspaceNames       []string   `json:"workspace_names"`
	DefaultWorkspaceName *string    `json:"default_workspace_name"`
	Key                  string     `json:"key,omitempty"`
}

func keyView(tx *bolt.Tx, k *APIKey) keyResponse {
	v := keyResponse{ID: k.ID, CreatedAt: k.CreatedAt, ShortKey: k.ShortKey, Description: k.Description,
		ReadOnly: k.ReadOnly, ExpiresAt: k.ExpiresAt, WorkspaceNames: []string{}}
	name := func(id uuid.UUID) string {
		ws, err := getWorkspace(tx, id)
		if err != nil {
			return ""
		}
		return ws.DisplayName
	}
	if k.WorkspaceID != nil {
		v.WorkspaceNames = append(v.WorkspaceNames, name(*k.WorkspaceID))
	}
	if k.DefaultWorkspaceID != nil {
		n := name(*k.DefaultWorkspaceID)
		v.DefaultWorkspaceName = &n
	}
	return v
}

// workspaceRole maps a role_id (a built-in role name or its lowercase form) to a workspace role.
func workspaceRole(id *string) (string, error) {
	if id == nil {
		return auth.WSAdmin, nil
	}
	for _, r := range []string{auth.WSAdmin, auth.WSEditor, auth.WSViewer} {
		if strings.EqualFold(*id, r) || strings.EqualFold(*id, "workspace_"+r) {
			return r, nil
		}
	}
	return "", httpx.Invalid("enum", "role_id must name a workspace role: Admin, Editor or Viewer", "body", "role_id")
}

func (s *Store) decodeKeyRequest(r *http.Request) (*keyCreateRequest, error) {
	var req keyCreateRequest
	if r.ContentLength != 0 {
		if err := httpx.DecodeJSON(r, &req, true); err != nil {
			return nil, err
		}
	}
	if req.Description != nil && len(*req.Description) > 1000 {
		return nil, httpx.Invalid("string_too_long", "description must be at most 1000 characters", "body", "description")
	}
	if req.ExpiresAt != nil && !req.ExpiresAt.After(s.now()) {
		return nil, httpx.Invalid("value_error", "expires_at must be in the future", "body", "expires_at")
	}
	return &req, nil
}

// createServiceKey: POST /api/v1/api-key — a service key of the current workspace.
func (s *Store) createServiceKey(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	if !p.CanAdminWorkspace() {
		return denied("Creating service keys requires the workspace Admin role.")
	}
	req, err := s.decodeKeyRequest(r)
	if err != nil {
		return err
	}
	role, err := workspaceRole(req.RoleID)
	if err != nil {
		return err
	}
	key := auth.NewKey("slw_sk")
	now := s.now()
	ws := p.WorkspaceID
	k := APIKey{ID: storage.NewID(), Kind: auth.KindServiceKey, Hash: auth.Hash(key), ShortKey: auth.ShortKey(key),
		Description: deref(req.Description, "Default API key"), ReadOnly: req.ReadOnly != nil && *req.ReadOnly,
		OrgID: p.OrgID, WorkspaceID: &ws, DefaultWorkspaceID: &ws, Role: role, CreatedAt: now, ExpiresAt: req.ExpiresAt}
	// Service keys act as their own service identity, so an audit trail names
	// the key's identity rather than whoever happened to create it.
	svc := User{ID: storage.NewID(), OrgID: p.OrgID, DisplayName: "service key " + k.ShortKey, Service: true,
		WorkspaceRoles: map[uuid.UUID]string{ws: role}, CreatedAt: now}
	k.UserID = svc.ID
	return s.issueKey(w, r, key, "api_key", func(tx *bolt.Tx) (*APIKey, error) {
		if err := putUser(tx, &svc); err != nil {
			return nil, err
		}
		return &k, putKey(tx, &k)
	})
}

// createPAT: POST /api/v1/api-key/current — a personal access token of the caller.
func (s *Store) createPAT(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	req, err := s.decodeKeyRequest(r)
	if err != nil {
		return err
	}
	key := auth.NewKey("slw_pt")
	return s.issueKey(w, r, key, "personal_access_token", func(tx *bolt.Tx) (*APIKey, error) {
		u, err := getUser(tx, p.UserID)
		if err != nil {
			return nil, err
		}
		if u.Service {
			return nil, denied("Personal access tokens belong to users; a service key cannot create one.")
		}
		var def *uuid.UUID
		if p.WorkspaceID != uuid.Nil {
			ws := p.WorkspaceID
			def = &ws
		}
		k := APIKey{ID: storage.NewID(), Kind: auth.KindPAT, Hash: auth.Hash(key), ShortKey: auth.ShortKey(key),
			Description: deref(req.Description, "Default API key"), ReadOnly: req.ReadOnly != nil && *req.ReadOnly,
			OrgID: p.OrgID, DefaultWorkspaceID: def, UserID: u.ID, CreatedAt: s.now(), ExpiresAt: req.ExpiresAt}
		return &k, putKey(tx, &k)
	})
}

// issueKey runs write, which stores a new key (and the service identity
// behind it) in the caller's transaction, records the event of type typ
// with it, and answers with the key in clear: the only time it is shown.
func (s *Store) issueKey(w http.ResponseWriter, r *http.Request, key, typ string, write func(*bolt.Tx) (*APIKey, error)) error {
	var resp keyResponse
	err := s.update(func(tx *bolt.Tx) error {
		k, err := write(tx)
		if err != nil {
			return err
		}
		resp = keyView(tx, k)
		return track.Success(tx, r, http.StatusOK, audit.Res(k.ID, typ))
	})
	if err != nil {
		return err
	}
	resp.Key = key
	httpx.WriteJSON(w, http.StatusOK, resp)
	return nil
}

// listKeys lists service keys of the workspace, or the caller's PATs.
func (s *Store) listKeys(personal bool) httpx.Handle {
	return func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
		p := auth.From(r)
		if !personal && !p.CanAdminWorkspace() {
			return denied("Listing service keys requires the workspace Admin role.")
		}
		out := []keyResponse{}
		return s.viewJSON(w, &out, func(tx *bolt.Tx) error {
			keys, err := keysWhere(tx, func(k *APIKey) bool { return visibleKey(k, p, personal) })
			for i := range keys {
				out = append(out, keyView(tx, &keys[i]))
			}
			return err
		})
	}
}

// deleteKeyHandler revokes a service key of the workspace or one of the caller's PATs.
func (s *Store) deleteKeyHandler(personal bool) httpx.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		p := auth.From(r)
		param := "api_key_id"
		if personal {
			param = "pat_id"
		}
		id, err := httpx.ParseID(ps.ByName("id"), "path", param)
		if err != nil {
			return err
		}
		if !personal && !p.CanAdminWorkspace() {
			return denied("Deleting service keys requires the workspace Admin role.")
		}
		var resp keyResponse
		return s.changeJSON(w, &resp, func(tx *bolt.Tx) error {
			k, err := getKey(tx, id)
			if err != nil || !visibleKey(k, p, personal) {
				return notFound("API key %s not found.", id)
			}
			resp = keyView(tx, k)
			typ := "api_key"
			if personal {
				typ = "personal_access_token"
			}
			return errors.Join(deleteKey(tx, k), track.Success(tx, r, http.StatusOK, audit.Res(k.ID, typ)))
		})
	}
}

// visibleKey reports whether k is one of the caller's PATs (personal) or a
// service key of the caller's workspace.
func visibleKey(k *APIKey, p *auth.Principal, personal bool) bool {
	return k.OrgID == p.OrgID && (personal && k.Kind == auth.KindPAT && k.UserID == p.UserID ||
		!personal && k.Kind == auth.KindServiceKey && k.WorkspaceID != nil && *k.WorkspaceID == p.WorkspaceID)
}

func deref(s *string, def string) string {
	if s == nil || *s == "" {
		return def
	}
	return *s
}
