package dashboard

import "slipway/server/apidoc"

// SessionRequest signs the browser in: a basic-auth user's email and
// password, or an API key.
type SessionRequest struct {
	Email    *string `json:"email,omitempty"`
	Password *string `json:"password,omitempty"`
	APIKey   *string `json:"api_key,omitempty" description:"Any credential the API takes in X-Api-Key."`
}

// SessionState says whether the browser is signed in.
type SessionState struct {
	SignedIn bool `json:"signed_in"`
}

// Whoami is who the dashboard's credential is and what it may do: the
// page leaves out controls the API would refuse (the API still decides).
type Whoami struct {
	Kind                  string  `json:"kind"`
	OrganizationID        string  `json:"organization_id" format:"uuid"`
	UserID                string  `json:"user_id"`
	OrganizationRole      string  `json:"organization_role"`
	WorkspaceRole         string  `json:"workspace_role"`
	ReadOnly              bool    `json:"read_only"`
	CanWrite              bool    `json:"can_write"`
	CanManageOrganization bool    `json:"can_manage_organization"`
	CanAdminWorkspace     bool    `json:"can_admin_workspace"`
	WorkspaceID           *string `json:"workspace_id" format:"uuid"`
}

// OpenAPI describes the dashboard's routes: its page and files, and the
// session routes that set and clear its cookies.
func OpenAPI() []apidoc.Op {
	const tag = "Dashboard"
	html := []apidoc.Resp{{Status: 200, Body: apidoc.Schema{"type": "string"}, ContentType: "text/html"}}
	return []apidoc.Op{
		{Method: "GET", Path: "/", ID: "dashboard", Summary: "The dashboard's page", Tag: tag, Public: true, Responses: html},
		{Method: "GET", Path: "/ui/assets/*file", ID: "dashboard_asset", Summary: "A file of the dashboard (script, style, icon)", Tag: tag, Public: true,
			Responses: []apidoc.Resp{{Status: 200, Body: apidoc.Schema{"type": "string"}, ContentType: "*/*"},
				{Status: 404, Body: apidoc.Schema{"type": "string"}, ContentType: "text/plain"}}},
		{Method: "GET", Path: "/ui/session", ID: "dashboard_whoami", Summary: "Who is signed in", Tag: tag, Security: apidoc.Organization,
			Responses: []apidoc.Resp{{Status: 200, Body: Whoami{}}}},
		{Method: "POST", Path: "/ui/session", ID: "dashboard_sign_in", Summary: "Sign the browser in", Tag: tag, Public: true,
			Description: "With {email, password} (a basic-auth user; the API's login makes the session, its throttle applies) or {api_key}. Sets the HttpOnly session cookie and the CSRF cookie (SameSite=Strict; Secure and __Host- prefixed over https and on localhost). Refused from another origin. Failed API-key sign-ins are throttled with failed logins: 429 with Retry-After.",
			Body:        SessionRequest{}, Responses: []apidoc.Resp{{Status: 200, Body: SessionState{}}}},
		{Method: "POST", Path: "/ui/signout", ID: "dashboard_sign_out", Summary: "Sign the browser out", Tag: tag, Public: true,
			Description: "Ends a login session (an API key stays valid until revoked) and clears the cookies.",
			Responses:   []apidoc.Resp{{Status: 200, Body: SessionState{}}}},
	}
}
