package server

import (
	"net/http"
	"testing"

	"slipway/server/auth"
)

func TestStripCredentials(t *testing.T) {
	cases := []struct {
		name     string
		in       map[string]string
		optIn    bool
		wantAuth string
	}{
		{"api key", map[string]string{"X-Api-Key": "k", "X-Tenant-Id": "w", "X-Organization-Id": "o"}, true, ""},
		{"bearer was the credential", map[string]string{"Authorization": "Bearer slw_pt_x"}, true, ""},
		{"empty api key, bearer was the credential", map[string]string{"X-Api-Key": "", "Authorization": "Bearer slw_pt_x"}, true, ""},
		{"api key and the agent's token, not opted in", map[string]string{"X-Api-Key": "k", "Authorization": "Bearer agent"}, false, ""},
		{"api key and the agent's token, opted in", map[string]string{"X-Api-Key": "k", "Authorization": "Bearer agent"}, true, "Bearer agent"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := http.NewRequest("GET", "http://agent/ok", nil)
			for k, v := range tc.in {
				r.Header.Set(k, v)
			}
			h := r.Header.Clone()
			h.Set("Other", "kept")
			stripCredentials(h, authorizationIsCallers(r) && tc.optIn)
			for _, k := range slipwayCredentialHeaders {
				if h.Get(k) != "" {
					t.Errorf("%s left: %q", k, h.Get(k))
				}
			}
			if got := h.Get("Authorization"); got != tc.wantAuth {
				t.Errorf("Authorization %q, want %q", got, tc.wantAuth)
			}
			if h.Get("Other") != "kept" {
				t.Error("another header was removed")
			}
		})
	}
}

// FuzzStripDashboardCookies: whatever Cookie header a browser or a client
// sends, no cookie the server would read as one of the dashboard's
// (slipway_*, with or without a __Host- prefix) is left for the agent, and other cookies survive.
func FuzzStripDashboardCookies(f *testing.F) {
	f.Add("slipway_session=slw_sk_1; theme=dark")
	f.Add(" slipway_csrf=x ;;slipway_workspace=y; a=b")
	f.Add("slipway_session")
	f.Add("__Host-slipway_session=slw_ss_1; __host-SLIPWAY_CSRF=2; x=3")
	f.Add("a=1; b=2")
	f.Fuzz(func(t *testing.T, line string) {
		h := http.Header{"Cookie": {line}}
		stripDashboardCookies(h)
		r := &http.Request{Header: h}
		for _, c := range r.Cookies() {
			if auth.IsSlipwayCookie(c.Name) {
				t.Fatalf("Cookie %q kept %s after stripping: %q", line, c.Name, h.Get("Cookie"))
			}
		}
		before := (&http.Request{Header: http.Header{"Cookie": {line}}}).Cookies()
		kept := map[string]bool{}
		for _, c := range r.Cookies() {
			kept[c.Name+"="+c.Value] = true
		}
		for _, c := range before {
			if !auth.IsSlipwayCookie(c.Name) && !kept[c.Name+"="+c.Value] {
				t.Fatalf("Cookie %q lost %s=%s: %q", line, c.Name, c.Value, h.Get("Cookie"))
			}
		}
	})
}
