package auth

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestCookieNames: the dashboard's cookies carry the __Host- prefix
// wherever the browser keeps Secure cookies (https, TLS, loopback hosts),
// and only the name of the request's origin is read: a cookie planted
// under the other name is no credential.
func TestCookieNames(t *testing.T) {
	for _, tc := range []struct {
		name   string
		host   string
		tls    bool
		https  bool // SLIPWAY_PUBLIC_URL is https
		secure bool
	}{
		{"loopback IPv4", "127.0.0.1:8484", false, false, true},
		{"other loopback IPv4", "127.0.0.2:8484", false, false, true},
		{"loopback IPv6", "[::1]:8484", false, false, true},
		{"localhost", "LocalHost:8484", false, false, true},
		{"name under .localhost", "slipway.localhost", false, false, true},
		{"plain http on the LAN", "192.168.1.5:8484", false, false, false},
		{"plain http by name", "slipway.lan:8484", false, false, false},
		{"not quite localhost", "localhost.example.com", false, false, false},
		{"TLS to Slipway", "slipway.lan:8484", true, false, true},
		{"behind a TLS proxy", "slipway.example.com", false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "http://"+tc.host+"/api/v1/api-key", nil)
			r.Host = tc.host
			if tc.tls {
				r.TLS = &tls.ConnectionState{}
			}
			if tc.https {
				ServedOverHTTPS(http.HandlerFunc(func(_ http.ResponseWriter, in *http.Request) { r = in })).ServeHTTP(nil, r)
			}
			if got := SecureCookies(r); got != tc.secure {
				t.Fatalf("SecureCookies = %v, want %v", got, tc.secure)
			}
			name, other := CredentialCookie, HostPrefix+CredentialCookie
			if tc.secure {
				name, other = other, name
			}
			if got := CookieName(r, CredentialCookie); got != name {
				t.Fatalf("CookieName = %q, want %q", got, name)
			}
			csrf := CookieName(r, CSRFCookie)
			withCookies := func(pairs ...string) *http.Request {
				in := r.Clone(r.Context())
				in.Header = http.Header{}
				in.Header.Set("Sec-Fetch-Site", "same-origin")
				in.Header.Set(CSRFHeader, "tok")
				for i := 0; i+1 < len(pairs); i += 2 {
					in.AddCookie(&http.Cookie{Name: pairs[i], Value: pairs[i+1]})
				}
				return in
			}
			if key, _, err := CookieCredential(withCookies(name, "KEY", csrf, "tok")); err != nil || key != "KEY" {
				t.Errorf("the origin's own cookie: %q, %v", key, err)
			}
			if key, _, err := CookieCredential(withCookies(other, "PLANTED", csrf, "tok")); err != nil || key != "" {
				t.Errorf("a cookie under the other name %s was read: %q, %v", other, key, err)
			}
			if key, _, err := CookieCredential(withCookies(other, "PLANTED", name, "KEY", csrf, "tok")); err != nil || key != "KEY" {
				t.Errorf("beside a cookie under the other name: %q, %v", key, err)
			}
			if _, _, err := CookieCredential(withCookies(name, "KEY", CSRFCookie, "tok", HostPrefix+CSRFCookie, "other")); err == nil && tc.secure {
				t.Error("an unprefixed CSRF cookie was accepted on a secure origin")
			}
		})
	}
}

func TestIsSlipwayCookie(t *testing.T) {
	for name, want := range map[string]bool{
		"slipway_session": true, "__Host-slipway_csrf": true, "__Secure-slipway_workspace": true, "SLIPWAY_SESSION": true,
		"__HOST-Slipway_Csrf": true, " slipway_session ": true, "slipway_anything": true,
		"slipway": false, "slipwayx": false, "my_slipway_session": false, "theme": false, "": false, "__Host-theme": false,
	} {
		if got := IsSlipwayCookie(name); got != want {
			t.Errorf("IsSlipwayCookie(%q) = %v, want %v", name, got, want)
		}
	}
}
