package auth

import (
	"context"
	"crypto/subtle"
	"net"
	"net/http"
	"net/netip"
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
//
// These are the base names. Wherever a browser accepts Secure cookies
// they are sent with the HostPrefix (see CookieName), which the browser
// only accepts from this very host, over a secure channel, with Path=/
// and no Domain: no other host (a deployment's custom_url, a sibling
// subdomain) and no plain-http answer can plant or overwrite them.
const (
	CredentialCookie = "slipway_session"
	CSRFCookie       = "slipway_csrf"
	WorkspaceCookie  = "slipway_workspace"
	CSRFHeader       = "X-CSRF-Token"
	// HostPrefix is the cookie name prefix browsers bind to one host.
	HostPrefix = "__Host-"
)

type httpsKey struct{}

// ServedOverHTTPS marks every request h serves as reaching Slipway over
// https (SLIPWAY_PUBLIC_URL is https: a TLS proxy sits in front, and the
// request Slipway sees is plain HTTP).
func ServedOverHTTPS(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), httpsKey{}, true)))
	})
}

// SecureCookies reports whether the browser that sent r accepts Secure
// cookies from the origin it sent r to, and so the __Host- prefix: the
// request came over TLS (to Slipway or to the TLS proxy of an https
// public URL), or to a loopback host, which browsers treat as a secure
// context (Chromium, Firefox: http://localhost, *.localhost, 127.0.0.0/8
// and [::1] keep Secure cookies). On plain http to any other address the
// browser would drop a Secure cookie, so the cookies go without the
// prefix there; that setup is only as safe as its network (see
// SECURITY.md).
func SecureCookies(r *http.Request) bool {
	if v, _ := r.Context().Value(httpsKey{}).(bool); v || r.TLS != nil {
		return true
	}
	return LoopbackHost(r.Host)
}

// LoopbackHost reports whether host (a Host header, port allowed) names
// the local machine: localhost, a name under .localhost, or a loopback IP.
func LoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// CookieName is the name the cookie base (CredentialCookie, CSRFCookie,
// WorkspaceCookie) has on r's origin: prefixed where SecureCookies holds.
// Only that name is read: on a secure origin an unprefixed cookie of the
// same base could have been planted, and is ignored.
func CookieName(r *http.Request, base string) string {
	if SecureCookies(r) {
		return HostPrefix + base
	}
	return base
}

// cookieValue is the value of the cookie base as r's origin names it.
func cookieValue(r *http.Request, base string) string {
	c, err := r.Cookie(CookieName(r, base))
	if err != nil {
		return ""
	}
	return c.Value
}

// SessionCookie is the credential the dashboard's cookie carries, without
// the CSRF checks of CookieCredential: for a handler that already
// authenticated the request by it (the API's logout).
func SessionCookie(r *http.Request) string { return cookieValue(r, CredentialCookie) }

// IsSlipwayCookie reports whether name is one of the dashboard's cookies,
// whatever the spelling a browser could take for it: any case, with or
// without the __Host- or __Secure- prefix. Every slipway_* name is
// reserved, so that a cookie added later is covered too.
func IsSlipwayCookie(name string) bool {
	n := strings.ToLower(strings.TrimSpace(name))
	for _, p := range []string{"__host-", "__secure-"} {
		n = strings.TrimPrefix(n, p)
	}
	return strings.HasPrefix(n, "slipway_")
}

// CookieCredential returns the credential and workspace a request carries
// in the dashboard's cookies, or empty strings when it has none. A request
// that changes something (any method but GET, HEAD and OPTIONS) with the
// cookie must be a same-origin one made by the dashboard's script: its
// CSRF header equals the CSRF cookie, and neither Origin nor
// Sec-Fetch-Site names another site. Otherwise it is refused with a 403,
// whatever the route (a cross-site form post never reaches a handler).
func CookieCredential(r *http.Request) (key, workspace string, err error) {
	key = cookieValue(r, CredentialCookie)
	if key == "" {
		return "", "", nil
	}
	workspace = cookieValue(r, WorkspaceCookie)
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return key, workspace, nil
	}
	if err := SameOrigin(r); err != nil {
		return "", "", err
	}
	token := cookieValue(r, CSRFCookie)
	sent := r.Header.Get(CSRFHeader)
	if token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(sent)) != 1 {
		return "", "", httpx.Forbidden("Cross-site request refused: a change made with the dashboard's cookie must carry the %s header the dashboard sends.", CSRFHeader)
	}
	return key, workspace, nil
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
