package agentapi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProjectCORS: the agent takes its policy from http.cors, and refuses
// to start on one a browser would refuse.
func TestProjectCORS(t *testing.T) {
	for _, tc := range []struct {
		name, cfg string
		policy    bool
		err       string
	}{
		{"none", `{"graphs": {}}`, false, ""},
		{"policy", `{"graphs": {}, "http": {"cors": {"allow_origins": ["https://smith.langchain.com"]}}}`, true, ""},
		{"credentials with any origin", `{"http": {"cors": {"allow_origins": ["*"], "allow_credentials": true}}}`, false, "allow_credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "langgraph.json")
			if err := os.WriteFile(path, []byte(tc.cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			p, err := projectCORS(path)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one about %s", err, tc.err)
				}
				return
			}
			if err != nil || (p != nil) != tc.policy {
				t.Fatalf("policy %v, err %v", p, err)
			}
			if tc.policy && !p.Allows("https://smith.langchain.com") {
				t.Fatal("the configured origin is not allowed")
			}
		})
	}
}
