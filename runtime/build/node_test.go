package build

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDetectJSInstall(t *testing.T) {
	cases := []struct {
		name    string
		files   []string
		tools   string // space-separated tools on PATH
		want    string
		wantJS  bool
		wantErr string
	}{
		{"not JavaScript", []string{"requirements.txt"}, "npm", "", false, ""},
		{"npm lock", []string{"package.json", "package-lock.json"}, "npm", "npm ci", true, ""},
		{"shrinkwrap", []string{"package.json", "npm-shrinkwrap.json"}, "npm", "npm ci", true, ""},
		{"no lock", []string{"package.json"}, "npm", "npm install", true, ""},
		{"yarn lock", []string{"package.json", "yarn.lock"}, "npm yarn", "yarn install --frozen-lockfile", true, ""},
		{"pnpm lock", []string{"package.json", "pnpm-lock.yaml"}, "npm pnpm", "pnpm install --frozen-lockfile", true, ""},
		// The official templates' yarn.lock on a host with npm only: npm
		// runs the package manager (the default major, as package.json
		// here names none).
		{"yarn lock without yarn", []string{"package.json", "yarn.lock"}, "npm", "npx --yes yarn@1 install --frozen-lockfile", true, ""},
		{"pnpm lock without pnpm", []string{"package.json", "pnpm-lock.yaml"}, "npm", "npx --yes pnpm@9 install --frozen-lockfile", true, ""},
		{"yarn lock without yarn or npm", []string{"package.json", "yarn.lock"}, "", "", true, "yarn is not installed"},
		{"no npm", []string{"package.json", "package-lock.json"}, "", "", true, "npm is not installed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, f), []byte("{}"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			look := func(tool string) (string, error) {
				for _, have := range strings.Fields(tc.tools) {
					if have == tool {
						return "/usr/bin/" + tool, nil
					}
				}
				return "", errors.New("not found")
			}
			got, js, err := DetectJSInstall(openTree(t, dir), ".", look)
			if js != tc.wantJS {
				t.Fatalf("JavaScript project: %v, want %v", js, tc.wantJS)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "install_command") {
					t.Fatalf("err %v, want %q and a hint at install_command", err, tc.wantErr)
				}
				return
			}
			if err != nil || got.Command != tc.want {
				t.Fatalf("got %q, %v; want %q", got.Command, err, tc.want)
			}
		})
	}
}

func TestCheckNodeVersion(t *testing.T) {
	cases := []struct {
		want, node string
		ok         bool
	}{
		{"20", "v20.20.2", true},
		{"18", "v20.20.2", true},
		{"22", "v20.20.2", false},
		{"20.21", "v20.20.2", false},
		{"20.20.2", "v20.20.2", true},
		{"20.20.3", "v20.20.2", false},
		{"v20", "v20.1.0", true},
	}
	for _, tc := range cases {
		err := CheckNodeVersion(strings.TrimPrefix(tc.want, "v"), tc.node)
		if (err == nil) != tc.ok {
			t.Errorf("CheckNodeVersion(%q, %q) = %v, want ok=%v", tc.want, tc.node, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), tc.node) {
			t.Errorf("the error does not name the host's node: %v", err)
		}
	}
	for _, bad := range []string{"lts", "20.x", ""} {
		if err := CheckNodeVersion(bad, "v20.0.0"); err == nil || !strings.Contains(err.Error(), "node_version") {
			t.Errorf("node_version %q: %v", bad, err)
		}
	}
}

func TestNodeVersion(t *testing.T) {
	for cfg, want := range map[string]string{`{"graphs":{}}`: "", `{"node_version":"20"}`: "20", `{"node_version":22}`: "22", `{"node_version":"v18.1"}`: "18.1"} {
		if got, err := NodeVersion([]byte(cfg)); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", cfg, got, err, want)
		}
	}
}
