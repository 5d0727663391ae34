package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestImagesRoutes: the install's id, and the prune's answer: what was
// removed, a 409 without the docker runtime, the failure's reason; all
// behind the admin token.
func TestImagesRoutes(t *testing.T) {
	prune := func(removed []string, err error) func(context.Context) ([]string, error) {
		return func(context.Context) ([]string, error) { return removed, err }
	}
	tests := []struct {
		name, method, path, token string
		prune                     func(context.Context) ([]string, error)
		status                    int
		body                      string
	}{
		{"instance", "GET", "/v1/instance", "tok", nil, 200, `{"instance_id":"inst-1"}`},
		{"no token", "GET", "/v1/instance", "", nil, 401, "admin token"},
		{"prune", "POST", "/v1/images/prune", "tok", prune([]string{"slipway-python:3.11-abc"}, nil), 200, `{"removed":["slipway-python:3.11-abc"]}`},
		{"nothing to prune", "POST", "/v1/images/prune", "tok", prune(nil, nil), 200, `{"removed":[]}`},
		{"no docker runtime", "POST", "/v1/images/prune", "tok", nil, 409, "does not run the docker runtime"},
		{"prune failed", "POST", "/v1/images/prune", "tok", prune(nil, errors.New("list images: engine gone")), 500, "list images: engine gone"},
		{"prune by GET", "GET", "/v1/images/prune", "tok", prune(nil, nil), 405, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{Instance: "inst-1", PruneImages: tc.prune, token: "tok"}
			req := httptest.NewRequest(tc.method, tc.path, nil)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, req)
			if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.body) {
				t.Fatalf("%s %s: %d %s; want %d with %q", tc.method, tc.path, rec.Code, rec.Body, tc.status, tc.body)
			}
			if rec.Code != http.StatusMethodNotAllowed && !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("not JSON: %s", rec.Body)
			}
		})
	}
}
