package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// DefaultPythonVersion is the version a project that names none prefers,
// as the reference CLI's default.
const DefaultPythonVersion = "3.11"

// PythonPlan is what installing a project's Python dependencies takes:
// everything but its own code, so that its Hash changes only when the
// dependencies do and a code-only change reuses the environment.
type PythonPlan struct {
	// Requirements are PyPI requirement strings: those of dependencies
	// and those a local dependency's pyproject.toml declares.
	Requirements []string
	// RequirementFiles are requirements.txt files of local dependencies
	// (slash-separated, relative to the configuration's directory).
	RequirementFiles []string
	// Packages are local dependencies with only a setup.py, installed
	// by pip as they are (their code is then part of the environment).
	Packages []string
	// Paths are the local dependencies' directories (and their src/
	// when they use that layout), put on the interpreter's path.
	Paths []string
	// PipConfigFile is pip_config_file, relative to the configuration's
	// directory.
	PipConfigFile string
	// Installer is "pip" or "uv" as pip_installer asks ("auto" or
	// unset: uv when present).
	Installer string
	// Hash identifies the environment the plan builds (with the
	// interpreter's version, which the caller adds).
	Hash string
}

// PythonPlan reads the project's local dependencies in the tree under dir
// (the configuration's directory, relative to the tree) and says what to
// install. Every file it reads is a regular file of the tree reached
// through no link (see Tree); errors name them relative to the tree.
func (p *Project) PythonPlan(t *Tree, dir string) (*PythonPlan, error) {
	plan := &PythonPlan{Installer: p.PipInstaller, PipConfigFile: p.PipConfigFile}
	h := sha256.New()
	fmt.Fprintf(h, "installer=%s\n", p.PipInstaller)
	hashFile := func(rel string) error {
		raw, err := t.ReadFile(pathJoin(dir, rel), maxProjectFile)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "file %s %d\n", rel, len(raw))
		h.Write(raw)
		return nil
	}
	if plan.PipConfigFile != "" {
		rel, _ := LocalPath(plan.PipConfigFile)
		plan.PipConfigFile = rel
		if err := hashFile(rel); err != nil {
			return nil, fmt.Errorf("pip_config_file: %w", err)
		}
	}
	for _, d := range p.Dependencies {
		if !isLocalDependency(d) {
			plan.Requirements = append(plan.Requirements, d)
			continue
		}
		rel, err := LocalPath(d)
		if err != nil {
			return nil, err
		}
		at := pathJoin(dir, rel)
		if !t.IsDir(at) {
			return nil, fmt.Errorf("dependency %q is not a directory of the source", d)
		}
		plan.Paths = append(plan.Paths, rel)
		if t.IsDir(pathJoin(at, "src")) {
			plan.Paths = append(plan.Paths, pathJoin(rel, "src"))
		}
		switch pyproject, setup := pathJoin(rel, "pyproject.toml"), pathJoin(rel, "setup.py"); {
		case t.Exists(pathJoin(dir, pyproject)):
			raw, err := t.ReadFile(pathJoin(dir, pyproject), maxProjectFile)
			if err != nil {
				return nil, err
			}
			reqs, err := PyprojectDependencies(raw)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", pathJoin(dir, pyproject), err)
			}
			plan.Requirements = append(plan.Requirements, reqs...)
		case t.Exists(pathJoin(dir, setup)):
			plan.Packages = append(plan.Packages, rel)
			if err := hashFile(setup); err != nil {
				return nil, err
			}
			// Installed from its code: a code change is a new environment.
			fmt.Fprintf(h, "package %s %d\n", rel, time.Now().UnixNano())
		}
		if req := pathJoin(rel, "requirements.txt"); t.Exists(pathJoin(dir, req)) {
			plan.RequirementFiles = append(plan.RequirementFiles, req)
			if err := hashFile(req); err != nil {
				return nil, err
			}
		}
	}
	for _, r := range plan.Requirements {
		fmt.Fprintf(h, "requirement %s\n", r)
	}
	plan.Hash = hex.EncodeToString(h.Sum(nil)[:8])
	return plan, nil
}

func pathJoin(dir, name string) string {
	if dir == "." || dir == "" {
		return name
	}
	if name == "." {
		return dir
	}
	return dir + "/" + name
}

// maxProjectFile bounds the files a plan reads.
const maxProjectFile = 1 << 20

// PyprojectDependencies are the requirement strings of a pyproject.toml's
// [project] dependencies (PEP 621) or, for a Poetry project without a
// [project] table, of its [tool.poetry.dependencies] (see poetry.go).
func PyprojectDependencies(raw []byte) ([]string, error) {
	var doc struct {
		Project *struct {
			Dependencies []string `toml:"dependencies"`
		} `toml:"project"`
		Tool struct {
			Poetry struct {
				Dependencies map[string]any `toml:"dependencies"`
			} `toml:"poetry"`
		} `toml:"tool"`
	}
	if _, err := toml.Decode(string(raw), &doc); err != nil {
		return nil, tomlError(err)
	}
	if doc.Project == nil {
		return poetryRequirements(doc.Tool.Poetry.Dependencies)
	}
	for i, d := range doc.Project.Dependencies {
		if strings.TrimSpace(d) == "" || strings.HasPrefix(strings.TrimSpace(d), "-") || strings.ContainsAny(d, "\r\n\x00") {
			return nil, fmt.Errorf("project.dependencies[%d] %q is not a requirement", i, d)
		}
	}
	return doc.Project.Dependencies, nil
}

// Interpreter is a Python found on the host.
type Interpreter struct {
	Path    string // as found; run it by this path
	Version string // major.minor.micro
}

// MajorMinor is "3.11" of "3.11.7".
func (i Interpreter) MajorMinor() string {
	parts := strings.SplitN(i.Version, ".", 3)
	if len(parts) < 2 {
		return i.Version
	}
	return parts[0] + "." + parts[1]
}

// PythonCandidates are the paths where interpreters may be: python3 and
// python3.X on PATH (pyenv's shims excluded: they choose by directory),
// pyenv's versions, and the system's /usr/bin and /usr/local/bin.
func PythonCandidates(pathEnv, pyenvRoot string) []string {
	var names []string
	names = append(names, "python3")
	for minor := 8; minor <= 15; minor++ {
		names = append(names, "python3."+strconv.Itoa(minor))
	}
	var out []string
	dirs := filepath.SplitList(pathEnv)
	dirs = append(dirs, "/usr/local/bin", "/usr/bin")
	for _, dir := range dirs {
		if dir == "" || !filepath.IsAbs(dir) || strings.Contains(dir, "/shims") {
			continue
		}
		for _, n := range names {
			out = append(out, filepath.Join(dir, n))
		}
	}
	if pyenvRoot != "" {
		if vs, err := filepath.Glob(filepath.Join(pyenvRoot, "versions", "*", "bin", "python3")); err == nil {
			out = append(out, vs...)
		}
	}
	return out
}

// FindInterpreters runs each candidate to learn its version and that it
// can make virtual environments. With public, only interpreters every
// user may run count (deployments run as uids of their own). Candidates
// that are the same file count once.
func FindInterpreters(ctx context.Context, candidates []string, public bool) []Interpreter {
	seen := map[string]bool{}
	var out []Interpreter
	for _, c := range candidates {
		real, err := filepath.EvalSymlinks(c)
		if err != nil || seen[real] {
			continue
		}
		st, err := os.Stat(real)
		if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
			continue
		}
		seen[real] = true
		if public && !worldReachable(c) {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		// venv and ensurepip: Debian splits them out (python3-venv), and
		// an interpreter without them cannot make the environment.
		raw, err := exec.CommandContext(cctx, c, "-I", "-c",
			"import sys, venv, ensurepip; print('%d.%d.%d' % sys.version_info[:3])").Output()
		cancel()
		if err != nil {
			continue
		}
		out = append(out, Interpreter{Path: c, Version: strings.TrimSpace(string(raw))})
	}
	return out
}

// worldReachable reports whether any user may run p: it and every
// directory on the way are executable by others (pyenv under /root is
// not), and so is what its symlinks lead to.
func worldReachable(p string) bool {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return false
	}
	for _, q := range []string{p, real} {
		for dir := filepath.Dir(q); ; dir = filepath.Dir(dir) {
			st, err := os.Stat(dir)
			if err != nil || st.Mode().Perm()&0o001 == 0 {
				return false
			}
			if dir == "/" {
				break
			}
		}
	}
	st, err := os.Stat(real)
	return err == nil && st.Mode().Perm()&0o005 == 0o005
}

// ErrNoInterpreter is a python_version no interpreter on the host has.
var ErrNoInterpreter = errors.New("no Python interpreter fits")

// ChooseInterpreter picks the interpreter for want (major.minor): the
// newest patch release of that version. Without want, DefaultPythonVersion
// when there is one, else the newest 3.9 or later.
func ChooseInterpreter(found []Interpreter, want string) (Interpreter, error) {
	var versions []string
	byVersion := map[string]Interpreter{}
	for _, i := range found {
		mm := i.MajorMinor()
		if cur, ok := byVersion[mm]; !ok || versionLess(cur.Version, i.Version) {
			byVersion[mm] = i
		}
	}
	for mm := range byVersion {
		versions = append(versions, mm)
	}
	sort.Slice(versions, func(a, b int) bool { return versionLess(versions[a], versions[b]) })
	if want != "" {
		if i, ok := byVersion[want]; ok {
			return i, nil
		}
	} else {
		if i, ok := byVersion[DefaultPythonVersion]; ok {
			return i, nil
		}
		for k := len(versions) - 1; k >= 0; k-- {
			if !versionLess(versions[k], "3.9") {
				return byVersion[versions[k]], nil
			}
		}
		want = "3.9 or later"
	}
	have := "none"
	if len(versions) > 0 {
		have = strings.Join(versions, ", ")
	}
	return Interpreter{}, fmt.Errorf("%w: python_version %s is not installed on this host (it has: %s); install it (e.g. apt-get install python%s-venv, or pyenv) or set python_version to one of those",
		ErrNoInterpreter, want, have, strings.TrimSuffix(want, " or later"))
}

// versionLess compares dotted versions numerically.
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for k := 0; k < len(as) && k < len(bs); k++ {
		x, _ := strconv.Atoi(as[k])
		y, _ := strconv.Atoi(bs[k])
		if x != y {
			return x < y
		}
	}
	return len(as) < len(bs)
}
