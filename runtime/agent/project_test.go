package agent

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestLoadProject(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("# comment\nA=1\nB=\"two words\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		config  string
		want    Project
		wantErr string
	}{
		{"no env", `{"graphs": {}}`, Project{}, ""},
		{"env object", `{"env": {"A": "1"}}`, Project{Env: map[string]string{"A": "1"}}, ""},
		{"env file", `{"env": ".env"}`, Project{Env: map[string]string{"A": "1", "B": "two words"}}, ""},
		{"http app", `{"http": {"app": "./src/app.ts:app"}}`, Project{HTTPApp: "./src/app.ts:app"}, ""},
		{"disabled route groups", `{"http": {"disable_runs": true, "disable_meta": true, "disable_store": false}}`, Project{Disabled: []string{"meta", "runs"}}, ""},
		{"generative UI", `{"ui": {"agent": "./src/ui.tsx"}, "ui_config": {"shared": ["lucide-react"]}}`, Project{UI: map[string]string{"agent": "./src/ui.tsx"}, UIShared: []string{"lucide-react"}}, ""},
		{"http app without export", `{"http": {"app": "./src/app.ts"}}`, Project{}, `is not "path:export"`},
		// As the reference servers: nothing to load (deploy clients never upload .env).
		{"missing env file", `{"env": "nope.env"}`, Project{}, ""},
		{"env of numbers", `{"env": {"A": 1}}`, Project{}, "env must be an object of strings"},
		{"env a list", `{"env": ["A"]}`, Project{}, "env must be an object of strings"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "langgraph.json")
			if err := os.WriteFile(path, []byte(tc.config), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := LoadProject(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestDefaultConfigs(t *testing.T) {
	got, err := DefaultConfigs(`{"agent": {"configurable": {"model": "m"}}}`)
	if err != nil || got["agent"]["configurable"].(map[string]any)["model"] != "m" {
		t.Fatalf("got %v, %v", got, err)
	}
	if got, err := DefaultConfigs(""); got != nil || err != nil {
		t.Fatalf("empty: %v, %v", got, err)
	}
	if _, err := DefaultConfigs(`["agent"]`); err == nil || !strings.Contains(err.Error(), "LANGGRAPH_CONFIG") {
		t.Fatalf("a list: %v", err)
	}
}
