package build

import (
	"reflect"
	"strings"
	"testing"
)

func TestPoetryConstraint(t *testing.T) {
	for _, tc := range []struct{ in, want, bad string }{
		{"^1.2.3", ">=1.2.3,<2", ""},
		{"^1.2", ">=1.2,<2", ""},
		{"^1", ">=1,<2", ""},
		{"^0.2.3", ">=0.2.3,<0.3", ""},
		{"^0.0.3", ">=0.0.3,<0.0.4", ""},
		{"^0.0", ">=0.0,<0.1", ""},
		{"^0", ">=0,<1", ""},
		{"~1.2.3", ">=1.2.3,<1.3", ""},
		{"~1.2", ">=1.2,<1.3", ""},
		{"~1", ">=1,<2", ""},
		{"~=1.2", "~=1.2", ""},
		{"1.2.3", "==1.2.3", ""},
		{"1.2.*", "==1.2.*", ""},
		{"*", "", ""},
		{"", "", ""},
		{">=1.2,<2.0", ">=1.2,<2.0", ""},
		{">= 1.2, < 2.0", ">=1.2,<2.0", ""},
		{">=1.2 <2.0", ">=1.2,<2.0", ""},
		{"!=1.5", "!=1.5", ""},
		{"1.0rc1", "==1.0rc1", ""},
		{"^1.2 || ^2.0", "", "alternatives"},
		{"^1.x", "", "not a release version"},
		{"latest", "", "not a version constraint"},
		{"==1; os_name", "", "not a version constraint"},
		{"--index-url=x", "", "not a version constraint"},
	} {
		got, err := PoetryConstraint(tc.in)
		if tc.bad != "" {
			if err == nil || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("PoetryConstraint(%q) = %q, %v; want an error with %q", tc.in, got, err, tc.bad)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("PoetryConstraint(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestPyprojectPoetry(t *testing.T) {
	for _, tc := range []struct {
		name, toml string
		want       []string
		bad        string
	}{
		{"poetry only", `
[tool.poetry]
name = "x"
[tool.poetry.dependencies]
python = "^3.9"
langgraph = "1.2.22"
httpx = "^0.27"
rich = { version = "^13", optional = true }
Pydantic = { version = "~2.7", extras = ["email"] }
tomli = { version = "^2", python = "<3.11" }
uvloop = { version = "*", markers = "sys_platform != 'win32'" }
lib = { git = "https://github.com/x/lib.git", tag = "v1" }
[tool.poetry.group.dev.dependencies]
pytest = "^8"
`, []string{"Pydantic[email]>=2.7,<2.8", "httpx>=0.27,<0.28", "langgraph==1.2.22", "lib @ git+https://github.com/x/lib.git@v1",
			`tomli>=2,<3; python_version < "3.11"`, "uvloop; (sys_platform != 'win32')"}, ""},
		{"project wins", `
[project]
dependencies = ["a==1"]
[tool.poetry.dependencies]
b = "^1"
`, []string{"a==1"}, ""},
		{"neither", "[tool.black]\nline-length = 88\n", nil, ""},
		{"path", "[tool.poetry.dependencies]\nmine = { path = \"../mine\" }\n", nil, "list the directory in the graph configuration's dependencies"},
		{"alternatives", "[tool.poetry.dependencies]\na = \"^1 || ^2\"\n", nil, "tool.poetry.dependencies.a: constraint"},
		{"multiple", "[tool.poetry.dependencies]\na = [{ version = \"^1\", python = \"<3.9\" }, { version = \"^2\" }]\n", nil, "multiple constraints"},
		{"bad name", "[tool.poetry.dependencies]\n\"-e x\" = \"1\"\n", nil, "not a package name"},
		{"bad key", "[tool.poetry.dependencies]\na = { versoin = \"1\" }\n", nil, `unknown key "versoin"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PyprojectDependencies([]byte(tc.toml))
			if tc.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tc.bad) {
					t.Fatalf("got %q, %v; want an error with %q", got, err, tc.bad)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func FuzzPoetryConstraint(f *testing.F) {
	for _, s := range []string{"^1.2.3", "~0.1", ">= 1, <2", "1.*", "*", "^0.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, c string) {
		spec, err := PoetryConstraint(c)
		if err != nil {
			return
		}
		// What pip reads after the name: comparisons only, never an
		// option, a marker or a second requirement.
		if strings.ContainsAny(spec, " ;@\t\r\n") || strings.HasPrefix(spec, "-") {
			t.Fatalf("PoetryConstraint(%q) = %q", c, spec)
		}
		for _, part := range strings.Split(spec, ",") {
			if part != "" && !poetryCompare.MatchString(part) {
				t.Fatalf("PoetryConstraint(%q) = %q: %q is not a comparison", c, spec, part)
			}
		}
	})
}
