package server

import (
	"net/http"
	"testing"
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
