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
	"slipway/server/controlplane"
	"slipway/server/httpx"
	"slipway/storage"
)

// tenantView is the hosted service's Tenant / TenantForUser shape.
type tenantView struct {
	ID             uuid.UUID `json:"id"`
	OrganizationID uuid.UUID `json:"organization_id"`
	CreatedAt      time.Time `json:"created_at"`
	DisplayName    string    `json:"display_name"`
	IsPersonal     bool      `json:"is_personal"`
	IsDeleted      bool      `json:"is_deleted"`
	TenantHandle   *string   `json:"tenant_handle"`
	RoleName       *string   `json:"role_name,omitempty"`
}

func wsView(ws *Workspace, role string) tenantView {
	v := tenantView{ID: ws.ID, OrganizationID: ws.OrgID, CreatedAt: ws.CreatedAt, DisplayName: ws.DisplayName, TenantHandle: ws.TenantHandle}
	if role != "" {
		v.RoleName = &role
	}
	return v
}

type workspaceRequest struct {
	ID           *uuid.UUID `json:"id"`
	DisplayName  *string    `json:"display_name"`
	TenantHandle *string    `json:"tenant_handle"`
}

func validateDisplayName(name *string) error {
	if name == nil {
		return httpx.Invalid("missing", "Field required", "body", "display_name")
	}
	if n := strings.TrimSpace(*name); n == "" || len(n) > 200 {
		return httpx.Invalid("value_error", "display_name must be 1 to 200 characters", "body", "display_name")
	}
	return nil
}

// createWorkspace: POST /api/v1/workspaces (organization:manage).
func (s *Store) createWorkspace(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	if !p.OrgManage() || p.ReadOnly {
		return httpx.Forbidden("Creating workspaces requires the Organization Admin or Organization Operator role.")
	}
	var req workspaceRequest
	if err := httpx.DecodeJSON(r, &req, true); err != nil {
		return err
	}
	if err := validateDisplayName(req.DisplayName); err != nil {
		return err
	}
	ws := Workspace{ID: storage.NewID(), OrgID: p.OrgID, DisplayName: strings.TrimSpace(*req.DisplayName),
		TenantHandle: req.TenantHandle, CreatedAt: s.now()}
	if req.ID != nil {
		ws.ID = *req.ID
	}
	err := s.update(func(tx *bolt.Tx) error {
		if tx.Bucket([]byte(storage.BucketWorkspaces)).Get(storage.Key(ws.ID)) != nil {
			return httpx.Conflict("Workspace %s already exists.", ws.ID)
		}
		return errors.Join(putWorkspace(tx, &ws), audit.Success(tx, r, http.StatusOK, audit.Res(ws.ID, "workspace")))
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, wsView(&ws, auth.WSAdmin))
	return nil
}

// listWorkspaces: GET /api/v1/workspaces — the workspaces the caller can use.
func (s *Store) listWorkspaces(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	out := []tenantView{}
	err := s.DB.View(func(tx *bolt.Tx) error {
		var u User
		if err := storage.Get(tx, storage.BucketUsers, storage.Key(p.UserID), &u); err != nil {
			return err
		}
		for _, id := range storage.PrefixIDs(tx, storage.IdxOrgWorkspaces, storage.Key(p.OrgID), false) {
			var ws Workspace
			if err := storage.Get(tx, storage.BucketWorkspaces, storage.Key(id), &ws); err != nil {
				return err
			}
			role := u.WorkspaceRoles[id]
			switch {
			case p.OrgManage() && p.OrgRole == auth.OrgAdmin:
				role = auth.WSAdmin
			case p.OrgManage():
			case p.Kind == auth.KindServiceKey && id == p.WorkspaceID:
				role = p.WorkspaceRole
			case role == "":
				continue
			}
			out = append(out, wsView(&ws, role))
		}
		return nil
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// workspaceAdmin returns the workspace named by the path if the caller may administer it.
func (s *Store) workspaceAdmin(tx *bolt.Tx, p *auth.Principal, ps httprouter.Params) (*Workspace, error) {
	id, err := httpx.ParseID(ps.ByName("id"), "path", "workspace_id")
	if err != nil {
		return nil, err
	}
	var ws Workspace
	if storage.Get(tx, storage.BucketWorkspaces, storage.Key(id), &ws) != nil || ws.OrgID != p.OrgID {
		return nil, httpx.NotFound("Workspace %s not found.", id)
	}
	if p.ReadOnly || !(p.OrgManage() || id == p.WorkspaceID && p.WorkspaceRole == auth.WSAdmin) {
		return nil, httpx.Forbidden("Changing workspace %s requires its Admin role or organization:manage.", id)
	}
	return &ws, nil
}

// patchWorkspace: PATCH /api/v1/workspaces/{id}.
func (s *Store) patchWorkspace(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p := auth.From(r)
	var req workspaceRequest
	if err := httpx.DecodeJSON(r, &req, true); err != nil {
		return err
	}
	if err := validateDisplayName(req.DisplayName); err != nil {
		return err
	}
	var out tenantView
	err := s.update(func(tx *bolt.Tx) error {
		ws, err := s.workspaceAdmin(tx, p, ps)
		if err != nil {
			return err
		}
		ws.DisplayName = strings.TrimSpace(*req.DisplayName)
		out = wsView(ws, "")
		return errors.Join(storage.Put(tx, storage.BucketWorkspaces, storage.Key(ws.ID), ws),
			audit.Success(tx, r, http.StatusOK, audit.Res(ws.ID, "workspace")))
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// deleteWorkspace: DELETE /api/v1/workspaces/{id}. A workspace that still
// owns deployments is refused rather than orphaning running agents.
func (s *Store) deleteWorkspace(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p := auth.From(r)
	err := s.update(func(tx *bolt.Tx) error {
		ws, err := s.workspaceAdmin(tx, p, ps)
		if err != nil {
			return err
		}
		if !p.OrgManage() {
			return httpx.Forbidden("Deleting workspaces requires organization:manage.")
		}
		if n := controlplane.WorkspaceDeploymentCount(tx, ws.ID); n > 0 {
			return httpx.BadRequest("Workspace %s still has %d deployment(s); delete them first.", ws.ID, n)
		}
		if len(storage.PrefixIDs(tx, storage.IdxOrgWorkspaces, storage.Key(ws.OrgID), false)) == 1 {
			return httpx.BadRequest("Workspace %s is the organization's last workspace.", ws.ID)
		}
		// Keys pinned to the workspace die with it.
		var doomed []APIKey
		err = tx.Bucket([]byte(storage.BucketAPIKeys)).ForEach(func(_, v []byte) error {
			var k APIKey
			if err := jsonUnmarshal(v, &k); err != nil {
				return err
			}
			if k.WorkspaceID != nil && *k.WorkspaceID == ws.ID {
				doomed = append(doomed, k)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for i := range doomed {
			if err := deleteKey(tx, &doomed[i]); err != nil {
				return err
			}
		}
		if err := tx.Bucket([]byte(storage.IdxOrgWorkspaces)).Delete(storage.Key(ws.OrgID, ws.ID)); err != nil {
			return err
		}
		return errors.Join(storage.Delete(tx, storage.BucketWorkspaces, storage.Key(ws.ID)),
			audit.Success(tx, r, http.StatusOK, audit.Res(ws.ID, "workspace")))
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{})
	return nil
}

// Routes registers the organization API on rt. Every route passes
// auth.Guard, which decides read-only access from the method; tr routes
// are tracked operations, whose refusals are audited.
func (s *Store) Routes(rt *httpx.Router, prefix string) {
	req := func(h httpx.Handle) httprouter.Handle { return auth.Require(s, false, h) }
	tr := func(op string, h httpx.Handle) httprouter.Handle {
		return auth.Guard(s, auth.Policy{}, func(h httpx.Handle) httpx.Handle { return s.Audit.Track(op, h) }, h)
	}
	rt.POST(prefix+"/api/v1/api-key", tr("create_api_key", s.createServiceKey))
	rt.GET(prefix+"/api/v1/api-key", req(s.listKeys(false)))
	rt.DELETE(prefix+"/api/v1/api-key/:id", tr("delete_api_key", s.deleteKeyHandler(false)))
	// httprouter cannot hold /api-key/:id beside /api-key/current/..., so the
	// personal routes hang off the same wildcard and dispatch on its value.
	rt.POST(prefix+"/api/v1/api-key/:id", tr("create_personal_access_token", s.onCurrent(s.createPAT)))
	rt.GET(prefix+"/api/v1/api-key/:id", req(s.onCurrent(s.listKeys(true))))
	rt.DELETE(prefix+"/api/v1/api-key/:id/:pat", tr("delete_personal_access_token", s.onCurrentID(s.deleteKeyHandler(true))))
	rt.POST(prefix+"/api/v1/workspaces", tr("create_workspace", s.createWorkspace))
	rt.GET(prefix+"/api/v1/workspaces", req(s.listWorkspaces))
	rt.PATCH(prefix+"/api/v1/workspaces/:id", tr("update_workspace", s.patchWorkspace))
	rt.DELETE(prefix+"/api/v1/workspaces/:id", tr("delete_workspace", s.deleteWorkspace))
	s.memberRoutes(rt, prefix, req, tr)
	s.settingsRoutes(rt, prefix, req, tr)
	rt.GET(prefix+"/api/v1/audit-logs", req(s.listAuditLogs))
	rt.GET(prefix+"/api/v1/audit-logs/operations", req(s.listAuditOperations))
}

func (s *Store) onCurrent(h httpx.Handle) httpx.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		if ps.ByName("id") != "current" {
			return httpx.NotFound("Not Found")
		}
		return h(w, r, ps)
	}
}

func (s *Store) onCurrentID(h httpx.Handle) httpx.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		if ps.ByName("id") != "current" {
			return httpx.NotFound("Not Found")
		}
		return h(w, r, httprouter.Params{{Key: "id", Value: ps.ByName("pat")}})
	}
}
