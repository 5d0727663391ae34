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
	"slipway/server/track"
)

// Org is an organization; its workspaces own everything else.
type Org struct {
	ID                 uuid.UUID      `json:"id"`
	DisplayName        string         `json:"display_name"`
	Plan               string         `json:"plan"`
	IsPersonal         bool           `json:"is_personal"`
	Config             map[string]any `json:"config"`
	DefaultWorkspaceID uuid.UUID      `json:"default_workspace_id"`
	CreatedAt          time.Time      `json:"created_at"`
}

// orgInfo is the part of the hosted OrganizationInfo shape Slipway has.
type orgInfo struct {
	ID          uuid.UUID      `json:"id"`
	DisplayName string         `json:"display_name"`
	Config      map[string]any `json:"config"`
	IsPersonal  bool           `json:"is_personal"`
	Tier        string         `json:"tier"`
	Permissions []string       `json:"permissions"`
	Disabled    bool           `json:"disabled"`
}

func infoOf(org *Org, p *auth.Principal) orgInfo {
	perms := []string{"organization:read"}
	if p.OrgManage() {
		perms = append(perms, "organization:manage")
	}
	cfg := org.Config
	if cfg == nil {
		cfg = map[string]any{}
	}
	return orgInfo{ID: org.ID, DisplayName: org.DisplayName, Config: cfg, IsPersonal: org.IsPersonal, Tier: org.Plan, Permissions: perms}
}

// getOrgInfo: GET /api/v1/orgs/current/info.
func (s *Store) getOrgInfo(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	var out orgInfo
	return s.viewJSON(w, &out, func(tx *bolt.Tx) error {
		var org Org
		if err := getOrg(tx, p.OrgID, &org); err != nil {
			return err
		}
		out = infoOf(&org, p)
		return nil
	})
}

// updateOrgInfo: PATCH /api/v1/orgs/current/info (update_organization_info).
// Only the display name is Slipway's to change; the plan and feature flags
// belong to the host administrator (slipway admin org ...).
func (s *Store) updateOrgInfo(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	var req struct {
		DisplayName *string `json:"display_name"`
	}
	p, err := managerBody(r, "Changing the organization", &req)
	if err != nil {
		return err
	}
	if err := validateDisplayName(req.DisplayName); err != nil {
		return err
	}
	var out orgInfo
	return s.changeJSON(w, &out, func(tx *bolt.Tx) error {
		var org Org
		if err := getOrg(tx, p.OrgID, &org); err != nil {
			return err
		}
		org.DisplayName = strings.TrimSpace(*req.DisplayName)
		out = infoOf(&org, p)
		return errors.Join(putOrg(tx, &org),
			track.Success(tx, r, http.StatusOK, audit.Res(org.ID, "organization")))
	})
}
