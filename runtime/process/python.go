package process

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"slipway/runtime"
	"slipway/runtime/build"
)

// A revision's Python environment lives beside its source:
//
//	revisions/<rev>/venv/        the virtual environment (the deployment's uid's)
//	revisions/<rev>/venv.hash    Slipway's: what it was built from (PythonPlan.Hash
//	                             and the interpreter), written once it is complete
//	revisions/<rev>/project.json Slipway's: the project's env, read at build time
//
//	revisions/<rev>/venv.base    Slipway's: the environment whose packages it shares
//
// A revision whose dependencies match an earlier revision's still on disk
// shares that environment's packages instead of installing again (see
// sharedVenv), so a code-only change rebuilds in a fraction of a second.
const (
	venvDir  = "venv"
	venvHash = "venv.hash"
	venvBase = "venv.base"
	// projectPth is the path file naming the project's directories.
	projectPth  = "_slipway_project.pth"
	projectFile = "project.json"
)

// PythonEnv is the variable that tells `slipway agent` which interpreter
// runs its Python host: the revision's virtual environment's.
const PythonEnv = "SLIPWAY_AGENT_PYTHON"

// projectState is what a build learns from the project that the agent's
// start needs, kept where the deployment's code cannot change it.
type projectState struct {
	Env    map[string]string `json:"env,omitempty"`
	Python bool              `json:"python,omitempty"`
}

// step runs one build step, logging its command (with Slipway's paths
// said relative, see scrubber) and how long it took. It sees only what a
// build of its revision needs (see visible).
func (d *Driver) step(ctx context.Context, log io.Writer, name string, s runtime.Spec, uid int, dir string, argv, env []string) error {
	fmt.Fprintf(log, "==> %s: %s\n", name, d.scrubber(s).Replace(strings.Join(argv, " ")))
	start := time.Now()
	cmd, err := d.sandbox.Command(ctx, d.revisionJob(s, uid, false, dir, argv, env))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(log, "<== %s failed after %s\n", name, took(start))
		return fmt.Errorf("%s failed: %w", name, err)
	}
	fmt.Fprintf(log, "<== %s done in %s\n", name, took(start))
	return nil
}

func took(start time.Time) string {
	return time.Since(start).Round(time.Millisecond).String()
}

// interpreters are the Pythons deployments may use here, found once.
func (d *Driver) interpreters(ctx context.Context) []build.Interpreter {
	d.pyOnce.Do(func() {
		root := os.Getenv("PYENV_ROOT")
		if root == "" {
			if home, err := os.UserHomeDir(); err == nil {
				root = filepath.Join(home, ".pyenv")
			}
		}
		d.pythons = build.FindInterpreters(ctx, build.PythonCandidates(os.Getenv("PATH"), root), d.uids != nil)
		vs := make([]string, 0, len(d.pythons))
		for _, i := range d.pythons {
			vs = append(vs, i.Version+" "+i.Path)
		}
		d.Log.Info().Strs("pythons", vs).Msg("Python interpreters for deployments")
	})
	return d.pythons
}

// venvEnviron is env with the virtual environment activated.
func venvEnviron(env []string, venv string) []string {
	out := make([]string, 0, len(env)+3)
	for _, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			kv = "PATH=" + filepath.Join(venv, "bin") + string(filepath.ListSeparator) + p
		}
		out = append(out, kv)
	}
	return append(out, "VIRTUAL_ENV="+venv, PythonEnv+"="+filepath.Join(venv, "bin", "python"))
}

// buildVenv makes the revision's virtual environment: cloned from an
// earlier revision's with the same hash, or created and installed.
func (d *Driver) buildVenv(ctx context.Context, s runtime.Spec, uid int, dir string, plan *build.PythonPlan, want string, env []string, log io.Writer) error {
	found := d.interpreters(ctx)
	py, err := build.ChooseInterpreter(found, want)
	if err != nil {
		return err
	}
	installer := plan.Installer
	uv, uvErr := exec.LookPath("uv")
	switch {
	case installer == "uv" && uvErr != nil:
		fmt.Fprintf(log, "note: pip_installer is uv but uv is not installed on this host; using pip\n")
		installer = "pip"
	case installer == "uv" || (installer == "auto" || installer == "") && uvErr == nil:
		installer = "uv"
	default:
		installer = "pip"
	}
	hash := plan.Hash + "-" + py.Version + "-" + installer
	rev := d.revDir(s.DeploymentID, s.RevisionID)
	venv := filepath.Join(rev, venvDir)
	fmt.Fprintf(log, "Python %s (%s), installer %s, environment %s\n", py.Version, py.Path, installer, hash)
	if err := os.RemoveAll(venv); err != nil {
		return fmt.Errorf("clear the virtual environment: %w", build.PlainError(err))
	}
	os.Remove(filepath.Join(rev, venvBase))
	if plan.PipConfigFile != "" {
		env = append(env, "PIP_CONFIG_FILE="+filepath.Join(dir, filepath.FromSlash(plan.PipConfigFile)))
	}
	env = append(env, "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1", "PIP_PROGRESS_BAR=off")
	if installer == "uv" {
		// uv trusts its own bundled roots unless told otherwise; pip, the
		// host's store (and so a TLS-inspecting proxy the host trusts).
		env = append(env, "UV_NATIVE_TLS=1")
	}
	python := filepath.Join(venv, "bin", "python")
	if from := d.sameVenv(s, hash); from != "" {
		start := time.Now()
		name := "share the environment of revision " + filepath.Base(filepath.Dir(from)) + " (same dependencies)"
		fmt.Fprintf(log, "==> %s\n", name)
		if err := sharedVenv(venv, from, py, plan, dir, uid); err != nil {
			return fmt.Errorf("%s: %w", name, build.PlainError(err))
		}
		if err := os.WriteFile(filepath.Join(rev, venvBase), []byte(from), 0o600); err != nil {
			return fmt.Errorf("mark the environment: %w", build.PlainError(err))
		}
		fmt.Fprintf(log, "<== %s done in %s\n", name, took(start))
		return d.markVenv(rev, hash)
	}
	if err := mkdirMode(venv, 0o700); err != nil {
		return err
	}
	if err := chownTree(venv, uid); err != nil {
		return err
	}
	create := []string{py.Path, "-m", "venv", venv}
	if installer == "uv" {
		create = []string{uv, "venv", "--quiet", "--python", py.Path, venv}
	}
	if err := d.step(ctx, log, "create the virtual environment", s, uid, dir, create, env); err != nil {
		return err
	}
	args := []string{}
	for _, f := range plan.RequirementFiles {
		args = append(args, "-r", filepath.Join(dir, filepath.FromSlash(f)))
	}
	args = append(args, plan.Requirements...)
	for _, p := range plan.Packages {
		args = append(args, filepath.Join(dir, filepath.FromSlash(p)))
	}
	if len(args) > 0 {
		install := append([]string{python, "-m", "pip", "install"}, args...)
		if installer == "uv" {
			install = append([]string{uv, "pip", "install", "--python", python}, args...)
		}
		if err := d.step(ctx, log, "install the dependencies", s, uid, dir, install, env); err != nil {
			return err
		}
	}
	// The project's own code is imported from this revision's source, not
	// installed: a path file names its directories.
	paths := sortedPaths(plan, dir)
	pth := `import os, sys, sysconfig; p = os.path.join(sysconfig.get_paths()["purelib"], "` + projectPth + `"); ` +
		`os.path.lexists(p) and os.remove(p); open(p, "w").write("".join(a + "\n" for a in sys.argv[1:]))`
	if err := d.step(ctx, log, "put the project's directories on the path", s, uid, dir, append([]string{python, "-I", "-c", pth}, paths...), env); err != nil {
		return err
	}
	return d.markVenv(rev, hash)
}

// markVenv records, once the revision's environment is complete, what it
// was built from.
func (d *Driver) markVenv(rev, hash string) error {
	if err := os.WriteFile(filepath.Join(rev, venvHash), []byte(hash), 0o600); err != nil {
		return fmt.Errorf("mark the environment: %w", build.PlainError(err))
	}
	return nil
}

// sharedVenv makes venv a virtual environment of its own that uses the
// packages of base (an earlier revision's environment with the same
// dependencies, kept as long as the deployment): its own pyvenv.cfg and
// interpreter links, so sys.prefix is this revision's, a path file that
// adds base's site-packages (their own path files included), the
// project's directories, and links to base's commands. Nothing is copied,
// so this takes milliseconds where copying (even as hard links) took half
// a second for a LangGraph environment. It is written as Slipway before
// uid owns any of it: no path in it is the deployment's yet.
func sharedVenv(venv, base string, py build.Interpreter, plan *build.PythonPlan, dir string, uid int) error {
	mm := py.MajorMinor()
	site := filepath.Join(venv, "lib", "python"+mm, "site-packages")
	bin := filepath.Join(venv, "bin")
	for _, d := range []string{venv, filepath.Join(venv, "lib"), filepath.Dir(site), site, bin} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	cfg := fmt.Sprintf("home = %s\ninclude-system-site-packages = false\nversion = %s\nexecutable = %s\n", filepath.Dir(py.Path), py.Version, py.Path)
	files := map[string]string{
		filepath.Join(venv, "pyvenv.cfg"):          cfg,
		filepath.Join(site, "_slipway_shared.pth"): sharedPaths(filepath.Join(base, "lib", "python"+mm, "site-packages")),
		filepath.Join(site, projectPth):            projectPaths(plan, dir),
	}
	for p, body := range files {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return err
		}
		_, err = f.WriteString(body)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	links := map[string]string{"python": py.Path, "python3": "python", "python" + mm: "python"}
	// base's commands (console scripts) run with base's interpreter; its
	// pip would install into base, which other revisions use: pip here is
	// `python -m pip`, which installs into this environment. base is the
	// deployment's (its uid owns it, and the serving revision may run
	// from it): its bin is listed through a Tree, so a bin that became a
	// link lists nothing of where it leads.
	bt, err := build.OpenTree(base)
	if err != nil {
		return fmt.Errorf("the shared environment: %w", err)
	}
	entries, err := bt.ReadDir("bin")
	bt.Close()
	if err != nil {
		return fmt.Errorf("the shared environment: %w", err)
	}
	for _, e := range entries {
		n := e.Name()
		if _, ok := links[n]; !ok && !strings.HasPrefix(n, "python") && !strings.HasPrefix(n, "pip") && !strings.HasPrefix(n, "activate") && !strings.HasPrefix(n, "Activate") {
			links[n] = filepath.Join(base, "bin", n)
		}
	}
	for n, target := range links {
		if err := os.Symlink(target, filepath.Join(bin, n)); err != nil {
			return err
		}
	}
	return chownTree(venv, uid)
}

// sharedPaths is the path file that adds baseSite, and reads its own path
// files as site.addsitedir would, but base's project directories: those
// are another revision's code.
func sharedPaths(baseSite string) string {
	// One line, run by site's exec: a comprehension there sees neither
	// the line's own names (before Python 3.12) nor, so, d: the directory
	// is spelled out each time and the modules are imported by name.
	d := strconv.Quote(baseSite)
	return fmt.Sprintf(`import sys; sys.path.append(%s); [__import__("site").addpackage(%s, n, None) for n in sorted(__import__("os").listdir(%s)) if n.endswith(".pth") and n != %q]`+"\n",
		d, d, d, projectPth)
}

// projectPaths is the path file that puts the project's directories (the
// local dependencies, under dir) on the interpreter's path.
func projectPaths(plan *build.PythonPlan, dir string) string {
	var b strings.Builder
	for _, p := range sortedPaths(plan, dir) {
		b.WriteString(p + "\n")
	}
	return b.String()
}

// sortedPaths are the project's directories, absolute.
func sortedPaths(plan *build.PythonPlan, dir string) []string {
	var paths []string
	for _, p := range plan.Paths {
		paths = append(paths, filepath.Join(dir, filepath.FromSlash(p)))
	}
	sort.Strings(paths)
	return paths
}

// sameVenv is the virtual environment of another revision of the
// deployment built from hash, or "".
func (d *Driver) sameVenv(s runtime.Spec, hash string) string {
	revs := filepath.Join(d.depDir(s.DeploymentID), "revisions")
	entries, err := os.ReadDir(revs)
	if err != nil {
		return ""
	}
	for _, e := range entries {
		if e.Name() == s.RevisionID || !e.IsDir() {
			continue
		}
		// Both files are Slipway's: the deployment cannot forge them.
		raw, err := os.ReadFile(filepath.Join(revs, e.Name(), venvHash))
		if err != nil || string(raw) != hash {
			continue
		}
		if _, err := os.Lstat(filepath.Join(revs, e.Name(), "built")); err != nil {
			continue
		}
		// A shared environment is not shared again: its base is.
		if base, err := os.ReadFile(filepath.Join(revs, e.Name(), venvBase)); err == nil {
			return string(base)
		}
		return filepath.Join(revs, e.Name(), venvDir)
	}
	return ""
}

// projectEnviron is the agent's environment for the revision: env with the
// project's env under it (the deployment's secrets win) and its virtual
// environment, if it has one. s.Env is already in env.
func (d *Driver) projectEnviron(s runtime.Spec, env []string) ([]string, error) {
	rev := d.revDir(s.DeploymentID, s.RevisionID)
	raw, err := os.ReadFile(filepath.Join(rev, projectFile))
	if os.IsNotExist(err) {
		return env, nil // built before builds kept it
	}
	if err != nil {
		return nil, fmt.Errorf("read the project's settings: %w", err)
	}
	var st projectState
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("read the project's settings: %w", err)
	}
	set := map[string]bool{}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	// What Slipway sets (the deployment's secrets among it) wins.
	keys := make([]string, 0, len(st.Env))
	for k := range st.Env {
		if !set[k] && !strings.HasPrefix(k, "SLIPWAY_") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys)+len(env))
	for _, k := range keys {
		out = append(out, k+"="+st.Env[k])
	}
	out = append(out, env...)
	if _, err := os.Lstat(filepath.Join(rev, venvHash)); err == nil {
		out = venvEnviron(out, filepath.Join(rev, venvDir))
	}
	return out, nil
}
