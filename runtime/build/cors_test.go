package build

import (
	"strings"
	"testing"
)

// TestParseProjectCORS: http.cors is read with the reference's keys, and a
// policy a browser would refuse fails the build naming the key.
func TestParseProjectCORS(t *testing.T) {
	for _, tc := range []struct {
		name, http string
		err        string // "" : accepted
		origins    int
	}{
		{"absent", ``, "", -1},
		{"app only", `"http": {"app": "./app.py:app"}`, "", -1},
		{"reference keys", `"http": {"cors": {"allow_origins": ["https://smith.langchain.com"], "allow_methods": ["GET", "POST"],
			"allow_headers": ["x-custom"], "allow_credentials": true, "allow_origin_regex": "https://.*\\.example\\.com",
			"expose_headers": ["x-custom"], "max_age": 60}}`, "", 1},
		{"credentials with any origin", `"http": {"cors": {"allow_origins": ["*"], "allow_credentials": true}}`, "allow_credentials", 0},
		{"bad regex", `"http": {"cors": {"allow_origin_regex": "("}}`, "allow_origin_regex", 0},
		{"unknown key", `"http": {"cors": {"allow_origin": ["https://a.example"]}}`, "allow_origin", 0},
		{"wrong type", `"http": {"cors": {"allow_origins": "https://a.example"}}`, "http.cors", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := `{"graphs": {"g": "./g.py:graph"}`
			if tc.http != "" {
				raw += ", " + tc.http
			}
			p, err := ParseProject([]byte(raw + "}"))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "http.cors") {
					t.Fatalf("err %v, want one naming http.cors and %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (p.CORS == nil) != (tc.origins < 0) || (p.CORS != nil && len(p.CORS.AllowOrigins) != tc.origins) {
				t.Fatalf("CORS %+v", p.CORS)
			}
			if p.CORS != nil && (!p.CORS.AllowCredentials || *p.CORS.MaxAge != 60 || p.CORS.AllowOriginRegex == "") {
				t.Fatalf("CORS %+v", p.CORS)
			}
		})
	}
}
