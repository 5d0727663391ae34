package docker

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"slipway/runtime"
	"slipway/runtime/build"
)

func TestWithPackageManager(t *testing.T) {
	for _, tc := range []struct {
		tool, pkg, want, bad string
	}{
		{"npm", `{}`, "npm ci", ""},
		{"yarn", `{}`, "npm install --global --prefix /opt/slipway-pm yarn@1 && PATH=/opt/slipway-pm/bin:$PATH yarn install --frozen-lockfile", ""},
		{"pnpm", `{"packageManager": "pnpm@8.15.4+sha256.abc"}`, "npm install --global --prefix /opt/slipway-pm pnpm@8.15.4 && PATH=/opt/slipway-pm/bin:$PATH pnpm install --frozen-lockfile", ""},
		{"pnpm", `{"packageManager": "yarn@4.1.0"}`, "npm install --global --prefix /opt/slipway-pm pnpm@9 && PATH=/opt/slipway-pm/bin:$PATH pnpm install --frozen-lockfile", ""},
		{"yarn", `{"packageManager": "yarn@1.22.0; rm -rf /"}`, "", "is not a version of yarn"},
		{"yarn", `not json`, "", "package.json is not valid JSON"},
	} {
		install := map[string]string{"npm": "npm ci", "yarn": "yarn install --frozen-lockfile", "pnpm": "pnpm install --frozen-lockfile"}[tc.tool]
		got, err := withPackageManager(tc.tool, install, []byte(tc.pkg))
		if tc.bad != "" {
			if err == nil || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("%s %s: got %q, %v; want an error with %q", tc.tool, tc.pkg, got, err, tc.bad)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s %s: got %q, %v; want %q", tc.tool, tc.pkg, got, err, tc.want)
		}
	}
}

func TestProjectLanguage(t *testing.T) {
	for _, tc := range []struct {
		cfg, want string
	}{
		{`{"graphs": {"a": "./src/agent.ts:graph"}}`, "node"},
		{`{"graphs": {"a": "./agent.mjs:graph"}, "node_version": "20"}`, "node"},
		{`{"graphs": {"a": {"builtin": "echo"}}, "node_version": "20"}`, "node"},
		{`{"graphs": {"a": "./agent.py:graph"}}`, "python"},
		{`{"graphs": {"a": "pkg.mod:graph"}}`, "python"},
		{`{"graphs": {"a": {"builtin": "echo"}}, "python_version": "3.11"}`, "python"},
		{`{"graphs": {"a": {"builtin": "echo"}}}`, ""},
		{`{"graphs": {"a": "./agent.py:graph", "b": "./src/b.ts:graph"}}`, "both"},
	} {
		proj, err := build.ParseProject([]byte(tc.cfg))
		if err != nil {
			t.Fatal(err)
		}
		got, err := projectLanguage(proj)
		switch tc.want {
		case "both":
			if !errors.Is(err, runtime.ErrUnsupported) || !strings.Contains(err.Error(), "both Python and JavaScript graphs") {
				t.Errorf("%s: %v, want the refusal", tc.cfg, err)
			}
		case "node", "python", "":
			want := map[string]projectBuild{"node": (*Driver).nodeBuild, "python": (*Driver).pythonBuild, "": nil}[tc.want]
			if err != nil || reflect.ValueOf(got).Pointer() != reflect.ValueOf(want).Pointer() {
				t.Errorf("%s: got a different build (%v), want %s", tc.cfg, err, tc.want)
			}
		}
	}
}
