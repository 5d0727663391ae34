package build

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Poetry projects declare their dependencies under
// [tool.poetry.dependencies] rather than PEP 621's [project] table, with
// constraints of Poetry's own syntax (^1.2, ~1.2.3, 1.2.*). They are
// translated to PEP 440 requirement strings and installed like [project]
// dependencies, rather than by installing the project with pip through its
// build backend: that would install the project's own code into the
// environment, so that every code change built a new one, where now the
// code is imported from the revision's source and a code-only change
// reuses the environment. Optional dependencies (installed only with an
// extra) and dependency groups (dev, test) are not installed, as
// `poetry install --only main` does not.

// poetryDependency is one value of [tool.poetry.dependencies]: a
// constraint string, or a table.
type poetryDependency struct {
	Version  string   `toml:"version"`
	Extras   []string `toml:"extras"`
	Optional bool     `toml:"optional"`
	Python   string   `toml:"python"`
	Markers  string   `toml:"markers"`
	Git      string   `toml:"git"`
	Branch   string   `toml:"branch"`
	Tag      string   `toml:"tag"`
	Rev      string   `toml:"rev"`
	URL      string   `toml:"url"`
	Path     string   `toml:"path"`
}

var (
	poetryName    = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)
	poetryVersion = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*([A-Za-z0-9.+-]*)$`)
	poetryPrefix  = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*\.\*$`)
	poetryCompare = regexp.MustCompile(`^(===|==|!=|<=|>=|<|>|~=)\s*([0-9A-Za-z.*+!-]+)$`)
	poetryExtra   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
)

// poetryRequirements translates [tool.poetry.dependencies] (without
// "python", the interpreter's own constraint) to requirement strings, in
// name order.
func poetryRequirements(deps map[string]any) ([]string, error) {
	names := make([]string, 0, len(deps))
	for n := range deps {
		if !strings.EqualFold(n, "python") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var out []string
	for _, n := range names {
		if !poetryName.MatchString(n) {
			return nil, fmt.Errorf("tool.poetry.dependencies: %q is not a package name", n)
		}
		req, err := poetryRequirement(n, deps[n])
		if err != nil {
			return nil, fmt.Errorf("tool.poetry.dependencies.%s: %w", n, err)
		}
		if req != "" {
			out = append(out, req)
		}
	}
	return out, nil
}

// poetryRequirement is one dependency's requirement string ("" for one
// that is installed only with an extra).
func poetryRequirement(name string, v any) (string, error) {
	var d poetryDependency
	switch v := v.(type) {
	case string:
		d.Version = v
	case map[string]any:
		for k, x := range v {
			if err := poetryField(&d, k, x); err != nil {
				return "", err
			}
		}
	case []map[string]any, []any:
		return "", fmt.Errorf("multiple constraints (one per Python version or platform) are not supported: give one")
	default:
		return "", fmt.Errorf("must be a version constraint or a table")
	}
	if d.Optional {
		return "", nil
	}
	if d.Path != "" {
		return "", fmt.Errorf("path dependencies are not installed from pyproject.toml: list the directory in the graph configuration's dependencies instead")
	}
	req := name
	if len(d.Extras) > 0 {
		for _, e := range d.Extras {
			if !poetryExtra.MatchString(e) {
				return "", fmt.Errorf("extra %q is not a name", e)
			}
		}
		req += "[" + strings.Join(d.Extras, ",") + "]"
	}
	switch {
	case d.Git != "":
		ref := d.Rev + d.Tag + d.Branch
		if strings.ContainsAny(d.Git+ref, " \t#;@") || !strings.Contains(d.Git, "://") {
			return "", fmt.Errorf("git %q (at %q) is not a repository URL pip can clone (https://, ssh://)", d.Git, ref)
		}
		u := "git+" + strings.TrimPrefix(d.Git, "git+")
		if ref != "" {
			u += "@" + ref
		}
		req += " @ " + u
	case d.URL != "":
		if strings.ContainsAny(d.URL, " \t;") {
			return "", fmt.Errorf("url %q is not a URL", d.URL)
		}
		req += " @ " + d.URL
	default:
		spec, err := PoetryConstraint(d.Version)
		if err != nil {
			return "", err
		}
		req += spec
	}
	var markers []string
	if d.Python != "" {
		spec, err := PoetryConstraint(d.Python)
		if err != nil {
			return "", fmt.Errorf("python: %w", err)
		}
		for _, c := range strings.Split(spec, ",") {
			if c != "" {
				op := strings.TrimRight(c, "0123456789.*")
				markers = append(markers, fmt.Sprintf("python_version %s %q", op, strings.TrimPrefix(c, op)))
			}
		}
	}
	if m := strings.TrimSpace(d.Markers); m != "" {
		if strings.ContainsAny(m, "\r\n;") {
			return "", fmt.Errorf("markers %q is not one marker expression", m)
		}
		markers = append(markers, "("+m+")")
	}
	if len(markers) > 0 {
		req += "; " + strings.Join(markers, " and ")
	}
	return req, nil
}

// poetryField sets one key of a dependency's table.
func poetryField(d *poetryDependency, k string, x any) error {
	str := func(into *string) error {
		s, ok := x.(string)
		if !ok {
			return fmt.Errorf("%s must be a string", k)
		}
		*into = s
		return nil
	}
	switch k {
	case "version":
		return str(&d.Version)
	case "python":
		return str(&d.Python)
	case "markers":
		return str(&d.Markers)
	case "git":
		return str(&d.Git)
	case "branch":
		return str(&d.Branch)
	case "tag":
		return str(&d.Tag)
	case "rev":
		return str(&d.Rev)
	case "url":
		return str(&d.URL)
	case "path":
		return str(&d.Path)
	case "optional":
		b, ok := x.(bool)
		if !ok {
			return fmt.Errorf("optional must be true or false")
		}
		d.Optional = b
	case "extras":
		list, ok := x.([]any)
		if !ok {
			return fmt.Errorf("extras must be a list of names")
		}
		for _, e := range list {
			s, ok := e.(string)
			if !ok {
				return fmt.Errorf("extras must be a list of names")
			}
			d.Extras = append(d.Extras, s)
		}
	case "source", "allow-prereleases", "develop", "platform", "subdirectory":
		// Where to find it, or how to install it in development: pip
		// takes what PyPI (or pip_config_file's index) has.
	default:
		return fmt.Errorf("unknown key %q", k)
	}
	return nil
}

// PoetryConstraint translates a Poetry version constraint to a PEP 440
// specifier ("" for any version): ^ allows changes that keep the leftmost
// non-zero part, ~ changes below the minor (of the
// major when only it is given), a bare version is exact, and comparisons
// and wildcards are PEP 440's already. Alternatives (||) have no PEP 440
// equivalent and are refused.
func PoetryConstraint(c string) (string, error) {
	c = strings.TrimSpace(c)
	if c == "" || c == "*" {
		return "", nil
	}
	if strings.Contains(c, "||") || strings.Contains(c, "|") {
		return "", fmt.Errorf("constraint %q: alternatives (||) have no pip equivalent; give one range", c)
	}
	var out []string
	for _, part := range strings.FieldsFunc(c, func(r rune) bool { return r == ',' }) {
		part = strings.TrimSpace(part)
		// Poetry also separates an intersection with spaces: ">=1.2 <2".
		for _, p := range strings.Fields(joinOperators(part)) {
			spec, err := poetryOne(p)
			if err != nil {
				return "", fmt.Errorf("constraint %q: %w", c, err)
			}
			out = append(out, spec...)
		}
	}
	if len(out) == 0 {
		return "", fmt.Errorf("constraint %q is empty", c)
	}
	return strings.Join(out, ","), nil
}

// joinOperators removes the spaces between an operator and its version
// (">= 1.2" is ">=1.2"), so that the remaining spaces separate constraints.
func joinOperators(s string) string {
	var b strings.Builder
	prevOp := false
	for _, f := range strings.Fields(s) {
		if b.Len() > 0 && !prevOp {
			b.WriteByte(' ')
		}
		b.WriteString(f)
		prevOp = strings.Trim(f, "<>=!~^") == ""
	}
	return b.String()
}

// poetryOne translates one constraint.
func poetryOne(p string) ([]string, error) {
	switch {
	case p == "*":
		return nil, nil
	case strings.HasPrefix(p, "^"):
		v := strings.TrimPrefix(p, "^")
		parts, err := numericParts(v)
		if err != nil {
			return nil, err
		}
		// The first non-zero part is bumped; with all zeros, the last given.
		i := len(parts) - 1
		for k, n := range parts {
			if n != 0 {
				i = k
				break
			}
		}
		return []string{">=" + v, "<" + bump(parts, i)}, nil
	case strings.HasPrefix(p, "~") && !strings.HasPrefix(p, "~="):
		v := strings.TrimPrefix(p, "~")
		parts, err := numericParts(v)
		if err != nil {
			return nil, err
		}
		// The minor when one is given (~1.2 and ~1.2.3 stay below 1.3),
		// else the major.
		i := min(1, len(parts)-1)
		return []string{">=" + v, "<" + bump(parts, i)}, nil
	case poetryPrefix.MatchString(p):
		return []string{"==" + p}, nil
	case poetryVersion.MatchString(p):
		return []string{"==" + p}, nil
	}
	if m := poetryCompare.FindStringSubmatch(p); m != nil {
		return []string{m[1] + m[2]}, nil
	}
	return nil, fmt.Errorf("%q is not a version constraint", p)
}

// numericParts reads a version's release numbers (a pre-release suffix is
// not allowed after ^ or ~).
func numericParts(v string) ([]int, error) {
	var parts []int
	for _, s := range strings.Split(v, ".") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || len(s) > 9 {
			return nil, fmt.Errorf("%q is not a release version like 1.2.3", v)
		}
		parts = append(parts, n)
	}
	if len(parts) > 4 {
		return nil, fmt.Errorf("%q has too many parts", v)
	}
	return parts, nil
}

// bump is the version with part i incremented and what follows it
// dropped ("1.3" of 1.2.3 at 1).
func bump(parts []int, i int) string {
	out := make([]string, i+1)
	for k := 0; k < i; k++ {
		out[k] = strconv.Itoa(parts[k])
	}
	out[i] = strconv.Itoa(parts[i] + 1)
	return strings.Join(out, ".")
}
