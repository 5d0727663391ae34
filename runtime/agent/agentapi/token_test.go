package agentapi

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"slipway/runtime"
)

func TestRequireToken(t *testing.T) {
	tests := []struct {
		name, token, sent string
		send              bool
		want              int
	}{
		{name: "no token configured", token: "", want: 200},
		{name: "right token", token: "s3cret", sent: "s3cret", send: true, want: 200},
		{name: "missing", token: "s3cret", want: 401},
		{name: "wrong", token: "s3cret", sent: "s3creT", send: true, want: 401},
		{name: "prefix", token: "s3cret", sent: "s3c", send: true, want: 401},
		{name: "empty", token: "s3cret", sent: "", send: true, want: 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen string
			h := RequireToken(tt.token, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen = r.Header.Get(runtime.AgentTokenHeader)
			}))
			req := httptest.NewRequest("GET", "/ok", nil)
			if tt.send {
				req.Header.Set(runtime.AgentTokenHeader, tt.sent)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.want, rec.Body)
			}
			if tt.token != "" && seen != "" {
				t.Errorf("the token reached the API handlers: %q", seen)
			}
		})
	}
}
