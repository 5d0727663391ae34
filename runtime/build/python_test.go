package build

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseProject(t *testing.T) {
	cases := []struct {
		name, in string
		bad      string // part of the error, when refused
		check    func(t *testing.T, p *Project)
	}{
		{name: "all keys", in: `{"graphs": {"a": "./a.py:graph"}, "dependencies": [".", "./libs/x", "langgraph>=1"],
			"python_version": "3.12", "node_version": "20", "pip_config_file": "pip.conf", "pip_installer": "uv",
			"env": {"A": "1"}, "dockerfile_lines": ["RUN true"], "base_image": "python:3.12", "image_distro": "wolfi",
			"store": {}, "auth": {"path": "./auth.py:auth"}, "$schema": "https://langgra.ph/schema.json",
			"ui": {"a": "./ui.tsx"}, "ui_config": {"shared": ["x"]}}`,
			check: func(t *testing.T, p *Project) {
				if p.PythonVersion != "3.12" || p.PipInstaller != "uv" || p.EnvMap["A"] != "1" || p.ImageDistro != "wolfi" {
					t.Fatalf("%+v", p)
				}
				if !reflect.DeepEqual(p.Unsupported, []string{"auth", "store"}) {
					t.Fatalf("unsupported %v", p.Unsupported)
				}
				if !p.NeedsPython() {
					t.Fatal("a .py graph needs Python")
				}
			}},
		{name: "env file", in: `{"env": ".env"}`, check: func(t *testing.T, p *Project) {
			if p.EnvFile != ".env" {
				t.Fatalf("%+v", p)
			}
		}},
		{name: "module spec is python", in: `{"graphs": {"a": "my_pkg.agent:graph"}}`, check: func(t *testing.T, p *Project) {
			if !p.PythonGraphs() {
				t.Fatal("a module spec is a Python graph")
			}
		}},
		{name: "js project", in: `{"graphs": {"a": "./src/a.mjs:graph", "b": {"builtin": "echo"}}, "node_version": "20"}`,
			check: func(t *testing.T, p *Project) {
				if p.NeedsPython() {
					t.Fatal("a JS project needs no Python")
				}
			}},
		{name: "not an object", in: `[]`, bad: "JSON object"},
		{name: "bad python version", in: `{"python_version": "3"}`, bad: "python_version"},
		{name: "python version number", in: `{"python_version": 3.11}`, bad: "python_version"},
		{name: "bad node version", in: `{"node_version": "20.1"}`, bad: "node_version"},
		{name: "bad installer", in: `{"pip_installer": "conda"}`, bad: "pip_installer"},
		{name: "bad distro", in: `{"image_distro": "alpine"}`, bad: "image_distro"},
		{name: "dependency leaves", in: `{"dependencies": ["../other"]}`, bad: "leaves"},
		{name: "dependency absolute", in: `{"dependencies": ["/etc"]}`, bad: "relative"},
		{name: "dependency option", in: `{"dependencies": ["--index-url=http://evil"]}`, bad: "option"},
		{name: "dependency empty", in: `{"dependencies": [" "]}`, bad: "dependencies[0]"},
		{name: "env file leaves", in: `{"env": "../../master.key"}`, bad: "leaves"},
		{name: "env not strings", in: `{"env": {"A": 1}}`, bad: "env must be"},
		{name: "env bad name", in: `{"env": {"A=B": "1"}}`, bad: "not an environment variable name"},
		{name: "pip config leaves", in: `{"pip_config_file": "../pip.conf"}`, bad: "pip_config_file"},
		{name: "multi-line dockerfile line", in: `{"dockerfile_lines": ["RUN a\nRUN b"]}`, bad: "dockerfile_lines[0]"},
		{name: "base image with spaces", in: `{"base_image": "a b"}`, bad: "base_image"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParseProject([]byte(tc.in))
			if tc.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tc.bad) {
					t.Fatalf("err = %v, want %q", err, tc.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, p)
		})
	}
}

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// openTree opens dir as a Tree closed with the test.
func openTree(t *testing.T, dir string) *Tree {
	t.Helper()
	tr, err := OpenTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func TestPythonPlan(t *testing.T) {
	files := map[string]string{
		"pyproject.toml":              "[project]\nname = \"x\"\ndependencies = [\"langgraph==1.2.22\", \"httpx>=0.27\"]\n",
		"src/x/__init__.py":           "",
		"libs/tools/requirements.txt": "requests\n",
		"libs/legacy/setup.py":        "from setuptools import setup\nsetup(name='legacy')\n",
		"pip.conf":                    "[global]\n",
	}
	dir := writeTree(t, files)
	p, err := ParseProject([]byte(`{"dependencies": [".", "./libs/tools", "./libs/legacy", "openai"], "pip_config_file": "./pip.conf"}`))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := p.PythonPlan(openTree(t, dir), ".")
	if err != nil {
		t.Fatal(err)
	}
	want := &PythonPlan{
		Requirements:     []string{"langgraph==1.2.22", "httpx>=0.27", "openai"},
		RequirementFiles: []string{"libs/tools/requirements.txt"},
		Packages:         []string{"libs/legacy"},
		Paths:            []string{".", "src", "libs/tools", "libs/legacy"},
		PipConfigFile:    "pip.conf",
		Hash:             plan.Hash,
	}
	if !reflect.DeepEqual(plan, want) {
		t.Fatalf("plan\n got %+v\nwant %+v", plan, want)
	}

	// The hash follows the dependencies, not the code.
	hash := func(files map[string]string, deps string) string {
		p, err := ParseProject([]byte(`{"dependencies": ` + deps + `}`))
		if err != nil {
			t.Fatal(err)
		}
		plan, err := p.PythonPlan(openTree(t, writeTree(t, files)), ".")
		if err != nil {
			t.Fatal(err)
		}
		return plan.Hash
	}
	base := map[string]string{"pyproject.toml": files["pyproject.toml"], "agent.py": "graph = 1\n", "requirements.txt": "a\n"}
	h0 := hash(base, `["."]`)
	changed := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range base {
			m[a] = b
		}
		m[k] = v
		return m
	}
	if h := hash(changed("agent.py", "graph = 2\n"), `["."]`); h != h0 {
		t.Fatal("a code change changed the environment's hash")
	}
	for name, h := range map[string]string{
		"pyproject":    hash(changed("pyproject.toml", "[project]\ndependencies = [\"langgraph\"]\n"), `["."]`),
		"requirements": hash(changed("requirements.txt", "b\n"), `["."]`),
		"requirement":  hash(base, `[".", "openai"]`),
	} {
		if h == h0 {
			t.Errorf("a change of %s kept the environment's hash", name)
		}
	}
}

func TestPythonPlanRefuses(t *testing.T) {
	dir := writeTree(t, map[string]string{"pyproject.toml": "not = [toml", "lib/pyproject.toml": "[project]\ndependencies = [\"--index-url=x\"]\n", "file.txt": ""})
	if err := os.Symlink("/etc", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	for deps, bad := range map[string]string{
		`["."]`:          "not valid TOML",
		`["./lib"]`:      "not a requirement",
		`["./missing"]`:  "not a directory",
		`["./file.txt"]`: "not a directory",
		`["./link"]`:     "not a directory",
	} {
		p, err := ParseProject([]byte(`{"dependencies": ` + deps + `}`))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.PythonPlan(openTree(t, dir), "."); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%s: err = %v, want %q", deps, err, bad)
		}
	}
}

func TestChooseInterpreter(t *testing.T) {
	found := []Interpreter{{"/usr/bin/python3.11", "3.11.2"}, {"/opt/py/3.11.9/bin/python3", "3.11.9"},
		{"/opt/py/3.12.1/bin/python3", "3.12.1"}, {"/opt/py/3.8.18/bin/python3", "3.8.18"}}
	cases := []struct {
		found []Interpreter
		want  string
		path  string // chosen; "" when none fits
	}{
		{found, "3.11", "/opt/py/3.11.9/bin/python3"},
		{found, "3.12", "/opt/py/3.12.1/bin/python3"},
		{found, "", "/opt/py/3.11.9/bin/python3"},
		{found, "3.13", ""},
		{found[2:], "", "/opt/py/3.12.1/bin/python3"},
		{found[3:], "", ""},
		{nil, "3.11", ""},
	}
	for _, tc := range cases {
		got, err := ChooseInterpreter(tc.found, tc.want)
		if tc.path == "" {
			if !errors.Is(err, ErrNoInterpreter) {
				t.Errorf("%q among %v: %v, %v; want ErrNoInterpreter", tc.want, tc.found, got, err)
			}
			continue
		}
		if err != nil || got.Path != tc.path {
			t.Errorf("%q among %v: %v, %v; want %s", tc.want, tc.found, got, err, tc.path)
		}
	}
	_, err := ChooseInterpreter(found, "3.13")
	if err == nil || !strings.Contains(err.Error(), "3.8, 3.11, 3.12") {
		t.Errorf("the error names what there is: %v", err)
	}
}

// TestFindInterpreters runs the host's own interpreters, when it has any.
func TestFindInterpreters(t *testing.T) {
	found := FindInterpreters(context.Background(), PythonCandidates(os.Getenv("PATH"), ""), false)
	if len(found) == 0 {
		t.Skip("no Python 3 with venv on this host")
	}
	for _, i := range found {
		if !strings.HasPrefix(i.Version, "3.") || strings.Count(i.Version, ".") != 2 {
			t.Errorf("%s: version %q", i.Path, i.Version)
		}
	}
	for _, c := range PythonCandidates("/root/.pyenv/shims:/usr/bin", "") {
		if strings.Contains(c, "shims") {
			t.Errorf("candidate %s: pyenv's shims choose by directory, not by version", c)
		}
	}
}

func FuzzParseProject(f *testing.F) {
	for _, s := range []string{`{}`, `{"graphs": {"a": "./a.py:g"}, "dependencies": ["."], "env": ".env"}`,
		`{"python_version": "3.11", "pip_installer": "uv", "env": {"A": "b"}}`, `{"dependencies": ["../x"]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := ParseProject(raw)
		if err != nil {
			return
		}
		for _, d := range p.Dependencies {
			if isLocalDependency(d) {
				if c, err := LocalPath(d); err != nil || strings.HasPrefix(c, "..") || strings.HasPrefix(c, "/") {
					t.Fatalf("dependency %q accepted as %q", d, c)
				}
			}
		}
		p.NeedsPython()
	})
}

func FuzzPyprojectDependencies(f *testing.F) {
	f.Add([]byte("[project]\ndependencies = [\"langgraph\"]\n"))
	f.Add([]byte("[project]\nname = 'x'\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		deps, err := PyprojectDependencies(raw)
		if err != nil {
			return
		}
		for _, d := range deps {
			if strings.HasPrefix(strings.TrimSpace(d), "-") {
				t.Fatalf("option %q accepted as a requirement", d)
			}
		}
	})
}

func TestProjectEnv(t *testing.T) {
	dir := writeTree(t, map[string]string{".env": "A=1\n# comment\nB=\"two words\"\n", "secret.txt": "S=x\n"})
	if err := os.Symlink("secret.txt", filepath.Join(dir, "link.env")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg  string
		want map[string]string
		bad  string
	}{
		{`{"env": {"A": "1"}}`, map[string]string{"A": "1"}, ""},
		{`{"env": ".env"}`, map[string]string{"A": "1", "B": "two words"}, ""},
		{`{"env": "./missing.env"}`, nil, "missing.env"},
		{`{"env": "link.env"}`, nil, "symbolic link"},
		{`{}`, nil, ""},
	} {
		p, err := ParseProject([]byte(tc.cfg))
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.Env(openTree(t, dir), ".")
		if tc.bad != "" {
			if err == nil || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("%s: err = %v, want %q", tc.cfg, err, tc.bad)
			}
			continue
		}
		if err != nil || len(got) != len(tc.want) || !reflect.DeepEqual(got, tc.want) && len(tc.want) > 0 {
			t.Errorf("%s: %v, %v; want %v", tc.cfg, got, err, tc.want)
		}
	}
}
