package orgapi

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"slipway/server/auth"
	"slipway/server/httpx"
)

// Routes registers the organization API on rt. Every route passes
// auth.Guard, which decides read-only access from the method; tr routes
// are tracked operations, whose refusals are audited.
func (s *Store) Routes(rt *httpx.Router, prefix string) {
	req := func(h httpx.Handle) httprouter.Handle { return auth.Require(s, false, mapErrors(h)) }
	tr := func(op string, h httpx.Handle) httprouter.Handle {
		return auth.Guard(s, auth.Policy{}, func(h httpx.Handle) httpx.Handle { return s.Audit.Track(op, h) }, mapErrors(h))
	}
	v1 := prefix + "/api/v1"

	// Login sessions.
	rt.POST(v1+"/login", httpx.Adapt(mapErrors(s.login)))
	rt.POST(v1+"/logout", req(s.logout))

	// Workspace service keys and personal access tokens. httprouter cannot
	// hold /api-key/:id beside /api-key/current/..., so the personal routes
	// hang off the same wildcard and dispatch on its value.
	rt.POST(v1+"/api-key", tr("create_api_key", s.createServiceKey))
	rt.GET(v1+"/api-key", req(s.listKeys(false)))
	rt.DELETE(v1+"/api-key/:id", tr("delete_api_key", s.deleteKeyHandler(false)))
	rt.POST(v1+"/api-key/:id", tr("create_personal_access_token", onCurrent(s.createPAT)))
	rt.GET(v1+"/api-key/:id", req(onCurrent(s.listKeys(true))))
	rt.DELETE(v1+"/api-key/:id/:pat", tr("delete_personal_access_token", onCurrentID(s.deleteKeyHandler(true))))
	rt.GET(v1+"/orgs/current/personal-access-tokens", req(s.listKeys(true)))
	rt.POST(v1+"/orgs/current/personal-access-tokens", tr("create_personal_access_token", s.createPAT))
	rt.DELETE(v1+"/orgs/current/personal-access-tokens/:pat_id", tr("delete_personal_access_token",
		renameParam("pat_id", "id", s.deleteKeyHandler(true))))

	// Workspaces.
	rt.POST(v1+"/workspaces", tr("create_workspace", s.createWorkspace))
	rt.GET(v1+"/workspaces", req(s.listWorkspaces))
	rt.PATCH(v1+"/workspaces/:id", tr("update_workspace", s.patchWorkspace))
	rt.DELETE(v1+"/workspaces/:id", tr("delete_workspace", s.deleteWorkspace))

	// Organization members, invitations and basic-auth users.
	rt.GET(v1+"/orgs/current/members", req(s.listOrgMembers))
	rt.POST(v1+"/orgs/current/members", tr("invite_user_to_org", s.inviteHandler(false)))
	rt.POST(v1+"/orgs/current/members/batch", tr("invite_users_to_org_batch", s.inviteHandler(true)))
	rt.POST(v1+"/orgs/current/members/basic/batch", tr("add_basic_auth_users_to_org", s.addBasicAuthUsers))
	rt.PATCH(v1+"/orgs/current/members/:identity_id", tr("update_org_member", s.updateOrgMember))
	rt.DELETE(v1+"/orgs/current/members/:identity_id", tr("delete_org_member", s.deleteOrgMember))
	rt.DELETE(v1+"/orgs/current/members/:identity_id/pending", tr("delete_org_pending_member", s.deleteOrgPending))
	rt.PATCH(v1+"/orgs/members/basic", tr("update_basic_auth_user", s.updateBasicAuthUser))

	// Roles.
	rt.GET(v1+"/orgs/current/roles", req(s.listRoles))
	rt.POST(v1+"/orgs/current/roles", tr("create_role", s.createRole))
	rt.PATCH(v1+"/orgs/current/roles/:role_id", tr("update_role", s.updateRole))
	rt.DELETE(v1+"/orgs/current/roles/:role_id", tr("delete_role", s.deleteRole))

	// Workspace members. httprouter cannot hold the static "current"
	// segment beside the :id wildcard of PATCH and DELETE /workspaces/{id}.
	rt.GET(v1+"/workspaces/current/members", req(s.listWorkspaceMembers))
	rt.POST(v1+"/workspaces/current/members", tr("add_member_to_workspace", s.addWorkspaceMember))
	rt.POST(v1+"/workspaces/current/members/batch", tr("add_members_to_workspace_batch", s.addWorkspaceMembersBatch))
	rt.PATCH(v1+"/workspaces/:id/members/:identity_id", tr("update_workspace_member", onCurrent(s.updateWorkspaceMember)))
	rt.DELETE(v1+"/workspaces/:id/members/:identity_id", tr("delete_workspace_member", onCurrent(s.deleteWorkspaceMember)))
	rt.DELETE(v1+"/workspaces/:id/members/:identity_id/pending", tr("delete_workspace_pending_member", onCurrent(s.deleteWorkspacePending)))

	// Workspace secrets.
	rt.GET(v1+"/workspaces/current/secrets", req(s.listWorkspaceSecrets))
	rt.POST(v1+"/workspaces/current/secrets", tr("update_workspace_secrets", s.upsertWorkspaceSecrets))

	// Retention (TTL) settings.
	rt.GET(v1+"/orgs/ttl-settings", req(s.listTTLSettings))
	rt.PUT(v1+"/orgs/ttl-settings", tr("update_ttl_settings", s.upsertTTLSettings))

	// Organization info and service keys.
	rt.GET(v1+"/orgs/current/info", req(s.getOrgInfo))
	rt.PATCH(v1+"/orgs/current/info", tr("update_organization_info", s.updateOrgInfo))
	rt.GET(v1+"/orgs/current/service-keys", req(s.listOrgServiceKeys))
	rt.POST(v1+"/orgs/current/service-keys", tr("create_service_key", s.createOrgServiceKey))
	rt.DELETE(v1+"/orgs/current/service-keys/:api_key_id", tr("delete_service_key", s.deleteOrgServiceKey))

	// The audit log.
	rt.GET(v1+"/audit-logs", req(s.listAuditLogs))
	rt.GET(v1+"/audit-logs/operations", req(s.listAuditOperations))
}

// httpError answers the organization API's domain errors (*errs.Error)
// by httpx.FromDomain, the one table of their statuses; other errors pass
// unchanged.
func httpError(err error) error { return httpx.FromDomain(err) }

// mapErrors answers h's domain errors through httpError.
func mapErrors(h httpx.Handle) httpx.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		return httpError(h(w, r, ps))
	}
}

// onCurrent passes requests on .../{id}/... only for id "current".
func onCurrent(h httpx.Handle) httpx.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		if ps.ByName("id") != "current" {
			return httpx.NotFound("Not Found")
		}
		return h(w, r, ps)
	}
}

// onCurrentID is onCurrent for /api-key/current/{pat}: h gets the token's
// id as its id parameter.
func onCurrentID(h httpx.Handle) httpx.Handle {
	return onCurrent(renameParam("pat", "id", h))
}

// renameParam hands h the path parameter from under the name to.
func renameParam(from, to string, h httpx.Handle) httpx.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		return h(w, r, httprouter.Params{{Key: to, Value: ps.ByName(from)}})
	}
}
