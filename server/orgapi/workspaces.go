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
	"slipway/server/track"
	"slipway/storage"
)

// Workspace is the tenant of deployments, listeners, uploads and keys.
type Workspace struct {
	ID           uuid.UUID `json:"id"`
	OrgID        uuid.UUID `json:"organization_id"`
	DisplayName  string    `json:"display_name"`
	TenantHandle *string   `json:"tenant_handle"`
	CreatedAt    time.Time `json:"created_at"`
}

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
		return denied("Creating workspaces requires the Organization Admin or Organization Operator role.")
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
	return s.changeJSON(w, wsView(&ws, auth.WSAdmin), func(tx *bolt.Tx) error {
		if workspaceExists(tx, ws.ID) {
			return conflict("Workspace %s already exists.", ws.ID)
		}
		return errors.Join(putWorkspace(tx, &ws), track.Success(tx, r, http.StatusOK, audit.Res(ws.ID, "workspace")))
	})
}

// listWorkspaces: GET /api/v1/workspaces — the workspaces the caller can use.
func (s *Store) listWorkspaces(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	out := []tenantView{}
	return s.viewJSON(w, &out, func(tx *bolt.Tx) error {
		u, err := getUser(tx, p.UserID)
		if err != nil {
			return err
		}
		all, err := orgWorkspaces(tx, p.OrgID)
		if err != nil {
			return err
		}
		for _, ws := range all {
			id := ws.ID
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
}

// workspaceAdmin returns the workspace named by the path if the caller may administer it.
func (s *Store) workspaceAdmin(tx *bolt.Tx, p *auth.Principal, ps httprouter.Params) (*Workspace, error) {
	id, err := httpx.ParseID(ps.ByName("id"), "path", "workspace_id")
	if err != nil {
		return nil, err
	}
	ws, err := getWorkspace(tx, id)
	if err != nil || ws.OrgID != p.OrgID {
		return nil, notFound("Workspace %s not found.", id)
	}
	if p.ReadOnly || !(p.OrgManage() || id == p.WorkspaceID && p.WorkspaceRole == auth.WSAdmin) {
		return nil, denied("Changing workspace %s requires its Admin role or organization:manage.", id)
	}
	return ws, nil
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
	return s.changeJSON(w, &out, func(tx *bolt.Tx) error {
		ws, err := s.workspaceAdmin(tx, p, ps)
		if err != nil {
			return err
		}
		ws.DisplayName = strings.TrimSpace(*req.DisplayName)
		out = wsView(ws, "")
		return errors.Join(putWorkspace(tx, ws),
			track.Success(tx, r, http.StatusOK, audit.Res(ws.ID, "workspace")))
	})
}

// deleteWorkspace: DELETE /api/v1/workspaces/{id}. A workspace that still
// owns deployments is refused rather than orphaning running agents.
func (s *Store) deleteWorkspace(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p := auth.From(r)
	return s.changeJSON(w, map[string]any{}, func(tx *bolt.Tx) error {
		ws, err := s.workspaceAdmin(tx, p, ps)
		if err != nil {
			return err
		}
		if !p.OrgManage() {
			return denied("Deleting workspaces requires organization:manage.")
		}
		if n := controlplane.WorkspaceDeploymentCount(tx, ws.ID); n > 0 {
			return refused("Workspace %s still has %d deployment(s); delete them first.", ws.ID, n)
		}
		if len(orgWorkspaceIDs(tx, ws.OrgID)) == 1 {
			return refused("Workspace %s is the organization's last workspace.", ws.ID)
		}
		// Keys pinned to the workspace die with it.
		err = deleteKeysWhere(tx, func(k *APIKey) bool { return k.WorkspaceID != nil && *k.WorkspaceID == ws.ID })
		if err != nil {
			return err
		}
		return errors.Join(removeWorkspace(tx, ws),
			track.Success(tx, r, http.StatusOK, audit.Res(ws.ID, "workspace")))
	})
}
