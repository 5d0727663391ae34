package server

import (
	"encoding/json"
	"strings"
	"testing"

	"slipway/server/auth"
)

// TestOpenAPISessionCookie: the document's cookie scheme names the
// cookie the dashboard's sign-in sets on a secure origin (here loopback),
// and its description the CSRF cookie's name and the plain-http names.
func TestOpenAPISessionCookie(t *testing.T) {
	s := startApp(t, nil)
	var doc struct {
		Components struct {
			SecuritySchemes map[string]struct {
				In, Name, Description string
			} `json:"securitySchemes"`
		}
	}
	if err := json.Unmarshal(servedDocument(t, s), &doc); err != nil {
		t.Fatal(err)
	}
	scheme := doc.Components.SecuritySchemes["SessionCookie"]
	if scheme.In != "cookie" || scheme.Name != auth.HostPrefix+auth.CredentialCookie {
		t.Fatalf("SessionCookie scheme: in %q name %q, want the cookie %s%s", scheme.In, scheme.Name, auth.HostPrefix, auth.CredentialCookie)
	}
	for _, name := range []string{auth.HostPrefix + auth.CSRFCookie, auth.HostPrefix + auth.WorkspaceCookie, auth.CredentialCookie} {
		if !strings.Contains(scheme.Description, name) {
			t.Errorf("SessionCookie description does not name %s: %q", name, scheme.Description)
		}
	}
	r := s.Do("POST", "/ui/session", map[string]any{"api_key": s.Key}, "X-Api-Key", "")
	if r.Status != 200 {
		t.Fatalf("sign in: %d %s", r.Status, r.Body)
	}
	var names []string
	for _, c := range r.Header.Values("Set-Cookie") {
		names = append(names, strings.SplitN(c, "=", 2)[0])
	}
	if !strings.Contains(","+strings.Join(names, ",")+",", ","+scheme.Name+",") {
		t.Errorf("the sign-in set %q, not the documented %s", names, scheme.Name)
	}
}
