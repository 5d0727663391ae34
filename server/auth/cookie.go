package auth

import (
	"crypto/subtle"
	"net/http"
	"net/url"
	"strings"

	"slipway/server/httpx"
)

// The dashboard's cookies. The credential cookie holds what a script of
// the API would send (a login session's token or an API key) and is
// HttpOnly; the CSRF cookie is readable by the dashboard's own script,
// which echoes it in CSRFHeader (a double submit: a page of another site
// can make the browser send the cookies, but can neither read them nor
// set a custom header on a form post). The workspace cookie is the
// workspace switcher's choice, standing in for X-Tenant-Id, which an
// EventSource cannot send.
const (
	CredentialCookie = "slipway_session"
	CSRFCookie       = "slipway_csrf"
	WorkspaceCookie  = "slipway_workspace"
	CSRFHeader       = "X-CSRF-Token"
)

// CookieCredential returns the credential and workspace a request carries
// in the dashboard's cookies, or empty strings when it has none. A request
// that changes something (any method but GET, HEAD and OPTIONS) with the
// cookie must be a same-origin one made by the dashboard's script: its
// CSRF header equals the CSRF cookie, and neither Origin nor
// Sec-Fetch-Site names another site. Otherwise it is refused with a 403,
// whatever the route (a cross-site form post never reaches a handler).
func CookieCredential(r *http.Request) (key, workspace string, err error) {
	c, cerr := r.Cookie(CredentialCookie)
	if cerr != nil || c.Value == "" {
		return "", "", nil
	}
	if ws, err := r.Cookie(WorkspaceCookie); err == nil {
		workspace = ws.Value
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return c.Value, workspace, nil
	}
	if err := SameOrigin(r); err != nil {
		return "", "", err
	}
	token, terr := r.Cookie(CSRFCookie)
	sent := r.Header.Get(CSRFHeader)
	if terr != nil || token.Value == "" || subtle.ConstantTimeCompare([]byte(token.Value), []byte(sent)) != 1 {
		return "", "", httpx.Forbidden("Cross-site request refused: a change made with the dashboard's cookie must carry the %s header the dashboard sends.", CSRFHeader)
	}
	return c.Value, workspace, nil
}

// SameOrigin refuses a request that the browser says comes from another
// site: Sec-Fetch-Site other than same-origin or none (typed in the
// address bar), or an Origin whose host is not the request's. Requests
// without these headers (scripts, the CLI) pass: they carry no
// ambient cookie a page could have abused.
func SameOrigin(r *http.Request) error {
	refused := httpx.Forbidden("Cross-site request refused: the dashboard only accepts changes made from its own pages.")
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
	default:
		return refused
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || o == "null" || !strings.EqualFold(u.Host, r.Host) {
			return refused
		}
	}
	return nil
}
