package orgapi

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/google/uuid"
	"github.com/julienschmidt/httprouter"
	bolt "go.etcd.io/bbolt"

	"slipway/server/audit"
	"slipway/server/auth"
	"slipway/server/httpx"
	"slipway/server/track"
	"slipway/storage"
)

// Role is the hosted service's Role shape. Built-in roles are not stored:
// their ids are derived from their names, so they are the same on every
// install and a client can name them by id as the hosted API expects.
type Role struct {
	ID          uuid.UUID  `json:"id"`
	Name        string     `json:"name"`
	DisplayName string     `json:"display_name"`
	Description string     `json:"description"`
	OrgID       *uuid.UUID `json:"organization_id"`
	Permissions []string   `json:"permissions"`
	AccessScope string     `json:"access_scope"`
}

// Permissions Slipway checks. Workspace permissions may go into custom
// roles; organization permissions only come with the built-in
// organization roles, so a workspace role never grants them.
var (
	workspacePermissions = []string{"deployments:read", "deployments:create", "deployments:update", "deployments:delete",
		"projects:read", "projects:update", "projects:delete", "workspaces:read", "workspaces:manage"}
	orgPermissions = []string{"organization:read", "organization:manage"}
)

var roleNamespace = uuid.MustParse("6f1d4c2e-5b7a-4e0f-9c3d-2a8b1e7f6d10")

func builtinID(name string) uuid.UUID { return uuid.NewSHA1(roleNamespace, []byte(name)) }

func readPerms(perms []string) []string {
	var out []string
	for _, p := range perms {
		if strings.HasSuffix(p, ":read") {
			out = append(out, p)
		}
	}
	return out
}

// builtinRoles are the roles every organization has.
var builtinRoles = func() []Role {
	ws := func(name, desc string, perms []string) Role {
		return Role{ID: builtinID(name), Name: "WORKSPACE_" + strings.ToUpper(name), DisplayName: name, Description: desc,
			Permissions: perms, AccessScope: "workspace"}
	}
	org := func(name, desc string, perms []string) Role {
		return Role{ID: builtinID(name), Name: strings.ToUpper(strings.ReplaceAll(name, " ", "_")), DisplayName: name,
			Description: desc, Permissions: perms, AccessScope: "organization"}
	}
	editor := []string{}
	for _, p := range workspacePermissions {
		if p != "workspaces:manage" {
			editor = append(editor, p)
		}
	}
	return []Role{
		org(auth.OrgAdmin, "Full access to the organization", orgPermissions),
		org(auth.OrgOperator, "Manages the organization without being its owner", orgPermissions),
		org(auth.OrgUser, "Member of the organization", []string{"organization:read"}),
		org(auth.OrgViewer, "Read-only member of the organization", []string{"organization:read"}),
		ws(auth.WSAdmin, "Full access to the workspace", workspacePermissions),
		ws(auth.WSEditor, "Changes deployments and projects of the workspace", editor),
		ws(auth.WSViewer, "Reads the workspace", readPerms(workspacePermissions)),
	}
}()

func builtinByID(id uuid.UUID) (Role, bool) {
	for _, r := range builtinRoles {
		if r.ID == id {
			return r, true
		}
	}
	return Role{}, false
}

func builtinByName(name string) (Role, bool) {
	for _, r := range builtinRoles {
		if r.DisplayName == name {
			return r, true
		}
	}
	return Role{}, false
}

// roleLevel is the built-in workspace role whose checks a stored workspace
// role passes: built-ins are themselves; a custom role (stored by id) is
// the highest level its permissions reach, since Slipway's permission
// checks (auth.Principal) work on those three levels. An unknown or
// deleted role is no role.
func roleLevel(tx *bolt.Tx, stored string) string {
	switch stored {
	case auth.WSAdmin, auth.WSEditor, auth.WSViewer, "":
		return stored
	}
	id, err := uuid.Parse(stored)
	if err != nil {
		return ""
	}
	r, err := getRole(tx, id)
	if err != nil {
		return ""
	}
	level := auth.WSViewer
	for _, p := range r.Permissions {
		if p == "workspaces:manage" {
			return auth.WSAdmin
		}
		if !strings.HasSuffix(p, ":read") {
			level = auth.WSEditor
		}
	}
	return level
}

// roleRef describes a stored role for responses: its id and display name.
func roleRef(tx *bolt.Tx, stored string) (*uuid.UUID, *string) {
	if stored == "" {
		return nil, nil
	}
	if r, ok := builtinByName(stored); ok {
		return &r.ID, &r.DisplayName
	}
	id, err := uuid.Parse(stored)
	if err != nil {
		return nil, nil
	}
	r, err := getRole(tx, id)
	if err != nil {
		return nil, nil
	}
	return &r.ID, &r.DisplayName
}

// workspaceRoleFor resolves a role_id naming a workspace role (a built-in
// one, or a custom role of org) to its stored form; nil gives def.
func workspaceRoleFor(tx *bolt.Tx, org uuid.UUID, id *uuid.UUID, def string, loc ...any) (string, error) {
	if id == nil {
		return def, nil
	}
	if r, ok := builtinByID(*id); ok {
		if r.AccessScope != "workspace" {
			return "", httpx.Invalid("value_error", "role "+r.DisplayName+" is an organization role; a workspace role is needed here", loc...)
		}
		return r.DisplayName, nil
	}
	r, err := getRole(tx, *id)
	if err != nil || r.OrgID == nil || *r.OrgID != org {
		return "", httpx.Invalid("value_error", fmt.Sprintf("role %s is not a role of this organization", id), loc...)
	}
	return r.ID.String(), nil
}

// orgRoleFor resolves a role_id naming an organization role (built-in only).
func orgRoleFor(id *uuid.UUID, def string, loc ...any) (string, error) {
	if id == nil {
		return def, nil
	}
	if r, ok := builtinByID(*id); ok && r.AccessScope == "organization" {
		return r.DisplayName, nil
	}
	return "", httpx.Invalid("value_error", "role_id must name an organization role: Organization Admin, Organization Operator, Organization User or Organization Viewer", loc...)
}

type roleRequest struct {
	DisplayName *string   `json:"display_name"`
	Description *string   `json:"description"`
	Permissions *[]string `json:"permissions"`
}

func (req *roleRequest) validate() error {
	if err := validateDisplayName(req.DisplayName); err != nil {
		return err
	}
	if req.Description == nil {
		return httpx.Invalid("missing", "Field required", "body", "description")
	}
	if len(*req.Description) > 1000 {
		return httpx.Invalid("string_too_long", "description must be at most 1000 characters", "body", "description")
	}
	if req.Permissions == nil {
		return httpx.Invalid("missing", "Field required", "body", "permissions")
	}
	seen := map[string]bool{}
	for i, p := range *req.Permissions {
		switch {
		case contains(orgPermissions, p):
			return httpx.Invalid("value_error", "custom roles are workspace roles and cannot grant organization permissions ("+p+")", "body", "permissions", i)
		case !contains(workspacePermissions, p):
			return httpx.Invalid("enum", "permission must be one of "+strings.Join(workspacePermissions, ", "), "body", "permissions", i)
		case seen[p]:
			return httpx.Invalid("value_error", "permission "+p+" is listed twice", "body", "permissions", i)
		}
		seen[p] = true
	}
	return nil
}

// listRoles: GET /api/v1/orgs/current/roles — built-in and custom roles.
func (s *Store) listRoles(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	out := append([]Role{}, builtinRoles...)
	return s.viewJSON(w, &out, func(tx *bolt.Tx) error {
		custom, err := orgRoles(tx, p.OrgID)
		out = append(out, custom...)
		return err
	})
}

func roleNameTaken(tx *bolt.Tx, org uuid.UUID, name string, except uuid.UUID) bool {
	if _, ok := builtinByName(name); ok {
		return true
	}
	return customRoleNamed(tx, org, name, except)
}

// createRole: POST /api/v1/orgs/current/roles (create_role).
func (s *Store) createRole(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p, req, err := roleBody(r, "Creating roles")
	if err != nil {
		return err
	}
	org := p.OrgID
	name := strings.TrimSpace(*req.DisplayName)
	role := Role{ID: storage.NewID(), Name: "CUSTOM_" + strings.ToUpper(strings.Join(strings.Fields(name), "_")), DisplayName: name,
		Description: *req.Description, OrgID: &org, Permissions: append([]string{}, *req.Permissions...), AccessScope: "workspace"}
	sort.Strings(role.Permissions)
	return s.changeJSON(w, &role, func(tx *bolt.Tx) error { return saveRole(tx, r, &role) })
}

// roleBody decodes and checks the role an organization manager sends.
func roleBody(r *http.Request, what string) (*auth.Principal, *roleRequest, error) {
	var req roleRequest
	p, err := managerBody(r, what, &req)
	if err == nil {
		err = req.validate()
	}
	return p, &req, err
}

// saveRole writes a custom role with its event, unless another role of
// its organization has its name.
func saveRole(tx *bolt.Tx, r *http.Request, role *Role) error {
	if roleNameTaken(tx, *role.OrgID, role.DisplayName, role.ID) {
		return conflict("A role named %q already exists.", role.DisplayName)
	}
	return errors.Join(putRole(tx, role), track.Success(tx, r, http.StatusOK, audit.Res(role.ID, "role")))
}

// customRole loads the custom role named by the path, refusing built-ins.
func customRole(tx *bolt.Tx, p *auth.Principal, ps httprouter.Params) (*Role, error) {
	id, err := httpx.ParseID(ps.ByName("role_id"), "path", "role_id")
	if err != nil {
		return nil, err
	}
	if r, ok := builtinByID(id); ok {
		return nil, refused("%s is a built-in role and cannot be changed or deleted.", r.DisplayName)
	}
	role, err := getRole(tx, id)
	if err != nil || role.OrgID == nil || *role.OrgID != p.OrgID {
		return nil, notFound("Role %s not found.", id)
	}
	return role, nil
}

// updateRole: PATCH /api/v1/orgs/current/roles/{role_id} (update_role).
func (s *Store) updateRole(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p, req, err := roleBody(r, "Changing roles")
	if err != nil {
		return err
	}
	var out Role
	return s.changeJSON(w, &out, func(tx *bolt.Tx) error {
		role, err := customRole(tx, p, ps)
		if err != nil {
			return err
		}
		role.DisplayName, role.Description = strings.TrimSpace(*req.DisplayName), *req.Description
		role.Permissions = append([]string{}, *req.Permissions...)
		sort.Strings(role.Permissions)
		out = *role
		return saveRole(tx, r, role)
	})
}

// deleteRole: DELETE /api/v1/orgs/current/roles/{role_id} (delete_role).
// A role still held by a member or named by an invitation is refused, so
// nobody silently loses access.
func (s *Store) deleteRole(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	var out Role
	return s.changeAs(w, r, orgManager, "Deleting roles", &out, func(tx *bolt.Tx, p *auth.Principal) error {
		role, err := customRole(tx, p, ps)
		if err != nil {
			return err
		}
		stored := role.ID.String()
		users, err := orgUsers(tx, p.OrgID)
		if err != nil {
			return err
		}
		for _, u := range users {
			for _, wr := range u.WorkspaceRoles {
				if wr == stored {
					return refused("Role %s is still held by %s; change their role first.", role.DisplayName, u.DisplayName)
				}
			}
		}
		pending, err := orgPending(tx, p.OrgID)
		if err != nil {
			return err
		}
		for _, pm := range pending {
			if pm.WorkspaceRole == stored {
				return refused("Role %s is named by the pending invitation of %s.", role.DisplayName, pm.Email)
			}
		}
		out = *role
		return errors.Join(removeRole(tx, role),
			track.Success(tx, r, http.StatusOK, audit.Res(role.ID, "role")))
	})
}
