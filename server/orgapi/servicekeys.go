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
	"slipway/storage"
)

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
	return s.issueKey(w, r, key, "service_key", func(tx *bolt.Tx) (*APIKey, error) {
		if req.DefaultWorkspaceID != nil {
			if !workspaceInOrg(tx, p.OrgID, *req.DefaultWorkspaceID) {
				return nil, httpx.Invalid("value_error", "default_workspace_id is not a workspace of this organization", "body", "default_workspace_id")
			}
			ws := *req.DefaultWorkspaceID
			k.DefaultWorkspaceID = &ws
		}
		return &k, errors.Join(putUser(tx, &svc), putKey(tx, &k))
	})
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
	return s.viewJSON(w, &out, func(tx *bolt.Tx) error {
		keys, err := keysWhere(tx, func(k *APIKey) bool { return isOrgServiceKey(k, p.OrgID) })
		for i := range keys {
			out = append(out, keyView(tx, &keys[i]))
		}
		return err
	})
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
	return s.changeJSON(w, &resp, func(tx *bolt.Tx) error {
		k, err := getKey(tx, id)
		if err != nil || !isOrgServiceKey(k, p.OrgID) {
			return notFound("Service key %s not found.", id)
		}
		if k.OrgRole == auth.OrgAdmin && p.OrgRole != auth.OrgAdmin {
			return denied("Only an Organization Admin can delete keys with the Organization Admin role.")
		}
		resp = keyView(tx, k)
		return errors.Join(deleteKey(tx, k), track.Success(tx, r, http.StatusOK, audit.Res(k.ID, "service_key")))
	})
}
