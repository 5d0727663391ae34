package dashboard

import (
	"net/http"
	"time"

	"slipway/server/auth"
)

// setCookies signs the browser in: the credential (HttpOnly) and the CSRF
// token, named as auth.CookieName names them on r's origin (__Host- where
// the browser keeps Secure cookies), and clears the workspace choice.
func setCookies(w http.ResponseWriter, r *http.Request, credential, csrf string, expires time.Time) {
	secure := auth.SecureCookies(r)
	http.SetCookie(w, &http.Cookie{Name: auth.CookieName(r, auth.CredentialCookie), Value: credential, Path: "/", Expires: expires,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode})
	http.SetCookie(w, &http.Cookie{Name: auth.CookieName(r, auth.CSRFCookie), Value: csrf, Path: "/", Expires: expires,
		Secure: secure, SameSite: http.SameSiteStrictMode})
	http.SetCookie(w, &http.Cookie{Name: auth.CookieName(r, auth.WorkspaceCookie), Path: "/", MaxAge: -1,
		Secure: secure, SameSite: http.SameSiteStrictMode})
	clearLegacy(w, r)
}

// clearCookies signs the browser out.
func clearCookies(w http.ResponseWriter, r *http.Request) {
	secure := auth.SecureCookies(r)
	for _, base := range []string{auth.CredentialCookie, auth.CSRFCookie, auth.WorkspaceCookie} {
		http.SetCookie(w, &http.Cookie{Name: auth.CookieName(r, base), Path: "/", MaxAge: -1,
			HttpOnly: base == auth.CredentialCookie, Secure: secure, SameSite: http.SameSiteStrictMode})
	}
	clearLegacy(w, r)
}

// clearLegacy expires the unprefixed cookies on an origin that uses the
// prefixed ones: versions before the prefix set them there, and a
// credential the server no longer reads has no reason to stay in the
// browser. (They are not read: signing in again is the transition.)
func clearLegacy(w http.ResponseWriter, r *http.Request) {
	if !auth.SecureCookies(r) {
		return
	}
	for _, base := range []string{auth.CredentialCookie, auth.CSRFCookie, auth.WorkspaceCookie} {
		http.SetCookie(w, &http.Cookie{Name: base, Path: "/", MaxAge: -1, SameSite: http.SameSiteStrictMode})
	}
}
