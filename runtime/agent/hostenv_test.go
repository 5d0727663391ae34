package agent

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestLoadConfigEnv: "env" of langgraph.json as an object or a .env file
// path; anything else is a clear error.
func TestLoadConfigEnv(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("# comment\nB=2\nA=\"one\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, env string
		want      []string
		err       string
	}{
		{"none", ``, nil, ""},
		{"object", `, "env": {"Z": "last", "A": "first"}`, []string{"A=first", "Z=last"}, ""},
		{"dotenv file", `, "env": ".env"`, []string{"A=one", "B=2"}, ""},
		{"missing file", `, "env": "nope.env"`, nil, "env file"},
		{"not strings", `, "env": {"A": 1}`, nil, "env must be an object of strings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := filepath.Join(dir, "langgraph.json")
			if err := os.WriteFile(cfg, []byte(`{"graphs": {}`+tc.env+`}`), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := LoadConfigEnv(cfg)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("LoadConfigEnv = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestWithConfigEnv: the agent's own environment (the deployment's
// secrets) wins over the configuration's values.
func TestWithConfigEnv(t *testing.T) {
	got := withConfigEnv([]string{"PATH=/bin", "KEY=secret"}, []string{"KEY=from-config", "MODE=fast"})
	want := []string{"PATH=/bin", "KEY=secret", "MODE=fast"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("withConfigEnv = %q, want %q", got, want)
	}
}
