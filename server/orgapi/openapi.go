package orgapi

import (
	"time"

	"github.com/google/uuid"

	"slipway/server/apidoc"
	"slipway/server/audit"
)

// Response shapes the handlers write as maps, named for the document.
type (
	// LoginResponse is the answer of POST /api/v1/login.
	LoginResponse struct {
		AccessToken    string    `json:"access_token"`
		TokenType      string    `json:"token_type"`
		ExpiresAt      time.Time `json:"expires_at"`
		UserID         uuid.UUID `json:"user_id"`
		OrganizationID uuid.UUID `json:"organization_id"`
	}
	// LoginRequest is its body.
	LoginRequest struct {
		Email    string `json:"email"`
		Password string `json:"password"`
	}
	// AuditLogPage is a page of GET /api/v1/audit-logs.
	AuditLogPage struct {
		Items  []map[string]any `json:"items" description:"OCSF 1.7 API Activity events (class_uid 6003)."`
		Cursor *string          `json:"cursor"`
	}
	// WorkspaceSecretKey names one workspace secret (values are never served).
	WorkspaceSecretKey struct {
		Key string `json:"key"`
	}
	// WorkspaceSecretUpsert sets (or with a null value deletes) one secret.
	WorkspaceSecretUpsert struct {
		Key   *string `json:"key"`
		Value *string `json:"value"`
	}
	// TTLSettingsRequest is the body of PUT /api/v1/orgs/ttl-settings.
	TTLSettingsRequest struct {
		TenantID              *uuid.UUID `json:"tenant_id"`
		DefaultTraceTier      *string    `json:"default_trace_tier"`
		ApplyToAllProjects    *bool      `json:"apply_to_all_projects"`
		AuditLogRetentionDays *int       `json:"audit_log_retention_days" minimum:"1" maximum:"400"`
	}
	// OrgInfoPatch is the body of PATCH /api/v1/orgs/current/info.
	OrgInfoPatch struct {
		DisplayName *string `json:"display_name"`
	}
	// APIKeyCreateRequest is the body that creates a key or token.
	APIKeyCreateRequest = keyCreateRequest
	// APIKey is a key as listed (the key itself only when created).
	APIKeyResponse = keyResponse
	// Tenant is a workspace as served.
	Tenant = tenantView
	// WorkspaceRequest creates or renames a workspace.
	WorkspaceRequest = workspaceRequest
	// Member is an organization or workspace member.
	Member = memberView
	// PendingMember is an invitation.
	PendingInvite = pendingView
	// InviteRequest invites one user.
	InviteRequest = inviteRequest
	// MemberPatch changes a member.
	MemberPatch = memberPatch
	// UserWithPassword is a basic-auth user as created.
	UserWithPassword = userWithPassword
	// RoleRequest creates or changes a role.
	RoleRequest = roleRequest
	// OrganizationInfo is the caller's organization.
	OrganizationInfo = orgInfo
)

// OpenAPI describes the organization API routes Routes registers.
func OpenAPI() []apidoc.Op {
	org, ws := apidoc.Organization, apidoc.Workspace
	ok := func(body any) []apidoc.Resp { return []apidoc.Resp{{Status: 200, Body: body}} }
	empty := ok(apidoc.JSON)
	keys, wsT, mem, roles, set, audits, auth := "API keys", "Workspaces", "Members", "Roles", "Settings", "Audit log", "Authentication"
	members := apidoc.Schema{"type": "object", "description": "{organization_id or tenant_id, members: [Member], pending: [PendingInvite]}"}
	return []apidoc.Op{
		{Method: "POST", Path: "/api/v1/api-key", ID: "create_api_key", Summary: "Create a workspace service key", Tag: keys, Security: ws, Body: APIKeyCreateRequest{}, BodyOptional: true, Responses: ok(APIKeyResponse{})},
		{Method: "GET", Path: "/api/v1/api-key", ID: "list_api_keys", Summary: "List the workspace's service keys", Tag: keys, Security: ws, Responses: ok([]APIKeyResponse{})},
		{Method: "DELETE", Path: "/api/v1/api-key/:id", ID: "delete_api_key", Summary: "Revoke a workspace service key", Tag: keys, Security: ws, Responses: ok(APIKeyResponse{})},
		{Method: "POST", Path: "/api/v1/api-key/:id", ID: "create_personal_access_token_legacy", Summary: "Create a personal access token (id: current)", Tag: keys, Security: ws, Body: APIKeyCreateRequest{}, BodyOptional: true, Responses: ok(APIKeyResponse{})},
		{Method: "GET", Path: "/api/v1/api-key/:id", ID: "list_personal_access_tokens_legacy", Summary: "List the caller's personal access tokens (id: current)", Tag: keys, Security: ws, Responses: ok([]APIKeyResponse{})},
		{Method: "DELETE", Path: "/api/v1/api-key/:id/:pat", ID: "delete_personal_access_token_legacy", Summary: "Revoke a personal access token (id: current)", Tag: keys, Security: ws, Responses: ok(APIKeyResponse{})},
		{Method: "POST", Path: "/api/v1/workspaces", ID: "create_workspace", Summary: "Create a workspace", Tag: wsT, Security: org, Body: WorkspaceRequest{}, Responses: ok(Tenant{})},
		{Method: "GET", Path: "/api/v1/workspaces", ID: "list_workspaces", Summary: "List the workspaces the caller can use", Tag: wsT, Security: org, Responses: ok([]Tenant{})},
		{Method: "PATCH", Path: "/api/v1/workspaces/:id", ID: "update_workspace", Summary: "Rename a workspace", Tag: wsT, Security: org, Body: WorkspaceRequest{}, Responses: ok(Tenant{})},
		{Method: "DELETE", Path: "/api/v1/workspaces/:id", ID: "delete_workspace", Summary: "Delete a workspace", Tag: wsT, Security: org, Responses: empty},
		{Method: "POST", Path: "/api/v1/login", ID: "login", Summary: "Log in with email and password", Tag: auth, Public: true,
			Description: "Slipway's basic-auth login: the token is a Bearer credential until it expires or POST /api/v1/logout. HTTP Basic credentials (Authorization: Basic, no body) are accepted too.",
			Body:        LoginRequest{}, BodyOptional: true, Responses: ok(LoginResponse{})},
		{Method: "POST", Path: "/api/v1/logout", ID: "logout", Summary: "End the login session", Tag: auth, Security: []string{"bearer"}, Responses: empty},
		{Method: "GET", Path: "/api/v1/orgs/current/members", ID: "list_org_members", Summary: "List the organization's members and invitations", Tag: mem, Security: org, Responses: ok(members)},
		{Method: "POST", Path: "/api/v1/orgs/current/members", ID: "invite_user_to_org", Summary: "Invite a user", Tag: mem, Security: org, Body: InviteRequest{}, Responses: ok(PendingInvite{})},
		{Method: "POST", Path: "/api/v1/orgs/current/members/batch", ID: "invite_users_to_org_batch", Summary: "Invite users", Tag: mem, Security: org, Body: []InviteRequest{}, Responses: ok([]PendingInvite{})},
		{Method: "POST", Path: "/api/v1/orgs/current/members/basic/batch", ID: "add_basic_auth_users_to_org", Summary: "Add users who log in with a password", Tag: mem, Security: org,
			Description: "Each entry adds a user who logs in with POST /api/v1/login (or at the dashboard) with their own roles; without role_id and workspace_role_id a user is an Organization User and a workspace Viewer, who can read but not deploy or start runs. `slipway users add EMAIL --role editor` does the same from the command line.",
			Body:        []InviteRequest{}, Responses: ok([]UserWithPassword{})},
		{Method: "PATCH", Path: "/api/v1/orgs/current/members/:identity_id", ID: "update_org_member", Summary: "Change a member's organization role", Tag: mem, Security: org, Body: MemberPatch{}, Responses: ok(Member{})},
		{Method: "DELETE", Path: "/api/v1/orgs/current/members/:identity_id", ID: "delete_org_member", Summary: "Remove a member", Tag: mem, Security: org, Responses: empty},
		{Method: "DELETE", Path: "/api/v1/orgs/current/members/:identity_id/pending", ID: "delete_org_pending_member", Summary: "Withdraw an invitation", Tag: mem, Security: org, Responses: empty},
		{Method: "PATCH", Path: "/api/v1/orgs/members/basic", ID: "update_basic_auth_user", Summary: "Change one's own password or name", Tag: mem, Security: org, Body: MemberPatch{}, Responses: empty},
		{Method: "GET", Path: "/api/v1/orgs/current/roles", ID: "list_roles", Summary: "List roles", Tag: roles, Security: org, Responses: ok([]Role{})},
		{Method: "POST", Path: "/api/v1/orgs/current/roles", ID: "create_role", Summary: "Create a custom workspace role", Tag: roles, Security: org, Body: RoleRequest{}, Responses: ok(Role{})},
		{Method: "PATCH", Path: "/api/v1/orgs/current/roles/:role_id", ID: "update_role", Summary: "Change a custom role", Tag: roles, Security: org, Body: RoleRequest{}, Responses: ok(Role{})},
		{Method: "DELETE", Path: "/api/v1/orgs/current/roles/:role_id", ID: "delete_role", Summary: "Delete a custom role", Tag: roles, Security: org, Responses: ok(Role{})},
		{Method: "GET", Path: "/api/v1/workspaces/current/members", ID: "list_workspace_members", Summary: "List the workspace's members", Tag: mem, Security: ws, Responses: ok(members)},
		{Method: "POST", Path: "/api/v1/workspaces/current/members", ID: "add_member_to_workspace", Summary: "Add a member to the workspace", Tag: mem, Security: ws, Body: apidoc.JSON, Responses: ok(Member{})},
		{Method: "POST", Path: "/api/v1/workspaces/current/members/batch", ID: "add_members_to_workspace_batch", Summary: "Add members to the workspace", Tag: mem, Security: ws, Body: apidoc.Schema{"type": "array", "items": apidoc.JSON}, Responses: ok(apidoc.Schema{"type": "array"})},
		{Method: "PATCH", Path: "/api/v1/workspaces/:id/members/:identity_id", ID: "update_workspace_member", Summary: "Change a member's workspace role (id: current)", Tag: mem, Security: ws, Body: apidoc.JSON, Responses: ok(Member{})},
		{Method: "DELETE", Path: "/api/v1/workspaces/:id/members/:identity_id", ID: "delete_workspace_member", Summary: "Remove a member from the workspace (id: current)", Tag: mem, Security: ws, Responses: empty},
		{Method: "DELETE", Path: "/api/v1/workspaces/:id/members/:identity_id/pending", ID: "delete_workspace_pending_member", Summary: "Withdraw a workspace invitation (id: current)", Tag: mem, Security: ws, Responses: empty},
		{Method: "GET", Path: "/api/v1/workspaces/current/secrets", ID: "list_workspace_secrets", Summary: "List the workspace's secret names", Tag: set, Security: ws, Responses: ok([]WorkspaceSecretKey{})},
		{Method: "POST", Path: "/api/v1/workspaces/current/secrets", ID: "update_workspace_secrets", Summary: "Set or delete workspace secrets (1 to 100)", Tag: set, Security: ws,
			Body: []WorkspaceSecretUpsert{}, Responses: empty},
		{Method: "GET", Path: "/api/v1/orgs/ttl-settings", ID: "list_ttl_settings", Summary: "List retention settings", Tag: set, Security: org, Responses: ok([]TTLSettings{})},
		{Method: "PUT", Path: "/api/v1/orgs/ttl-settings", ID: "update_ttl_settings", Summary: "Set retention settings", Tag: set, Security: org,
			Description: "Slipway adds audit_log_retention_days (1 to 400; null restores the default) to the hosted shape.", Body: TTLSettingsRequest{}, Responses: ok(TTLSettings{})},
		{Method: "GET", Path: "/api/v1/orgs/current/info", ID: "get_organization_info", Summary: "The caller's organization", Tag: set, Security: org, Responses: ok(OrganizationInfo{})},
		{Method: "PATCH", Path: "/api/v1/orgs/current/info", ID: "update_organization_info", Summary: "Rename the organization", Tag: set, Security: org, Body: OrgInfoPatch{}, Responses: ok(OrganizationInfo{})},
		{Method: "GET", Path: "/api/v1/orgs/current/service-keys", ID: "list_service_keys", Summary: "List organization service keys", Tag: keys, Security: org, Responses: ok([]APIKeyResponse{})},
		{Method: "POST", Path: "/api/v1/orgs/current/service-keys", ID: "create_service_key", Summary: "Create an organization service key", Tag: keys, Security: org, Body: APIKeyCreateRequest{}, BodyOptional: true, Responses: ok(APIKeyResponse{})},
		{Method: "DELETE", Path: "/api/v1/orgs/current/service-keys/:api_key_id", ID: "delete_service_key", Summary: "Revoke an organization service key", Tag: keys, Security: org, Responses: ok(APIKeyResponse{})},
		{Method: "GET", Path: "/api/v1/orgs/current/personal-access-tokens", ID: "list_personal_access_tokens", Summary: "List the caller's personal access tokens", Tag: keys, Security: org, Responses: ok([]APIKeyResponse{})},
		{Method: "POST", Path: "/api/v1/orgs/current/personal-access-tokens", ID: "create_personal_access_token", Summary: "Create a personal access token", Tag: keys, Security: org, Body: APIKeyCreateRequest{}, BodyOptional: true, Responses: ok(APIKeyResponse{})},
		{Method: "DELETE", Path: "/api/v1/orgs/current/personal-access-tokens/:pat_id", ID: "delete_personal_access_token", Summary: "Revoke a personal access token", Tag: keys, Security: org, Responses: ok(APIKeyResponse{})},
		{Method: "GET", Path: "/api/v1/audit-logs", ID: "list_audit_logs", Summary: "Read the audit log (OCSF)", Tag: audits, Security: org,
			Description: "Needs the organization's can_use_audit_logs feature.",
			Query: []apidoc.Param{
				{Name: "start_time", Schema: apidoc.Schema{"type": "string", "format": "date-time"}},
				{Name: "end_time", Schema: apidoc.Schema{"type": "string", "format": "date-time"}},
				apidoc.IntParam("limit", "Page size.", 1, 100),
				{Name: "cursor", Description: "The cursor of the previous page."},
				{Name: "workspace_id", Schema: apidoc.Schema{"type": "string", "format": "uuid"}},
				{Name: "operations", Description: "Repeated; one of GET /api/v1/audit-logs/operations.", Schema: apidoc.Schema{"type": "array", "items": apidoc.Schema{"type": "string", "enum": audit.Operations}}},
			},
			Responses: ok(AuditLogPage{})},
		{Method: "GET", Path: "/api/v1/audit-logs/operations", ID: "list_audit_log_operations", Summary: "The operations the audit log records", Tag: audits, Security: org, Responses: ok(apidoc.Schema{"type": "array", "items": apidoc.Schema{"type": "string", "enum": audit.Operations}})},
	}
}
