package build

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestJSInstallViaNPM: a yarn.lock project on a host with npm but no yarn
// (the official JavaScript templates on a plain Node.js host) installs
// with the yarn its packageManager names, run by npm; a packageManager that
// is not a version is refused rather than put in a shell command.
func TestJSInstallViaNPM(t *testing.T) {
	cases := []struct{ name, pkg, want, wantErr string }{
		{"template", `{"packageManager": "yarn@1.22.22"}`, "npx --yes yarn@1.22.22 install --frozen-lockfile", ""},
		{"corepack hash", `{"packageManager": "yarn@1.22.22+sha512.a6b2f7"}`, "npx --yes yarn@1.22.22 install --frozen-lockfile", ""},
		{"another manager named", `{"packageManager": "pnpm@9.1.0"}`, "npx --yes yarn@1 install --frozen-lockfile", ""},
		{"no field", `{}`, "npx --yes yarn@1 install --frozen-lockfile", ""},
		{"not a version", `{"packageManager": "yarn@1; rm -rf ~"}`, "", "is not a version of yarn"},
		{"not JSON", `{`, "", "package.json is not valid JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range map[string]string{"package.json": tc.pkg, "yarn.lock": ""} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			onlyNPM := func(tool string) (string, error) {
				if tool == "npm" {
					return "/usr/bin/npm", nil
				}
				return "", os.ErrNotExist
			}
			got, js, err := DetectJSInstall(openTree(t, dir), ".", onlyNPM)
			if !js {
				t.Fatal("not seen as a JavaScript project")
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "rm -rf") {
					t.Fatalf("err %v, want %q without quoting the file", err, tc.wantErr)
				}
				return
			}
			if err != nil || got.Command != tc.want || got.Lock != "yarn.lock" || !strings.Contains(got.Note, "yarn is not installed on this host") {
				t.Fatalf("got %+v, %v; want %q", got, err, tc.want)
			}
		})
	}
}
