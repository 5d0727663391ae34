package process

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"

	"slipway/runtime/build"
)

// revisionProject is everything a build learns from a revision's files.
// Build reads it in one go right after unpacking, through a build.Tree
// (descriptor-relative, no link followed) while the tree is still
// Slipway's and 0700: no uid that runs deployment code can write there
// yet, and none could redirect a read if it could. From then on the build
// works from this value and from the project.json it keeps in the
// revision's own (Slipway's) directory, never from the files again, so
// nothing the deployment's code does to them afterwards (its own build
// steps, or a serving revision wherever the sandbox lets it reach the
// tree) is ever read by Slipway.
type revisionProject struct {
	cfg  string // the graph configuration, slash-separated, relative to the source
	dir  string // its directory, relative to the source ("." at the root)
	proj *build.Project
	env  map[string]string
	plan *build.PythonPlan // nil: no Python environment
	node string            // node_version, "" for none
	// js is the install of a JavaScript project when the revision names
	// no install_command (jsFound: it has a package.json); jsErr says why
	// it cannot be installed here, reported after the node_version check.
	js      build.JSInstall
	jsFound bool
	jsErr   error
	envNote string // why the env file loads nothing (build.ErrNoEnvFile)
}

// readRevision reads the revision's project from its source tree: the
// graph configuration graphConfig, its env file, the files that name its
// Python dependencies, and which JavaScript lock file it has.
func readRevision(t *build.Tree, graphConfig, installCommand string) (*revisionProject, error) {
	cfg, err := build.GraphConfigPath(graphConfig)
	if err != nil {
		return nil, err
	}
	if err := checkGraphConfig(t, cfg, graphConfig); err != nil {
		return nil, err
	}
	r := &revisionProject{cfg: cfg, dir: path.Dir(cfg)}
	var raw []byte
	if r.proj, raw, err = build.LoadProject(t, cfg); err != nil {
		return nil, err
	}
	if r.env, err = r.proj.Env(t, r.dir); errors.Is(err, build.ErrNoEnvFile) {
		r.envNote, err = err.Error(), nil
	}
	if err != nil {
		return nil, err
	}
	if r.proj.NeedsPython() {
		if r.plan, err = r.proj.PythonPlan(t, r.dir); err != nil {
			return nil, err
		}
	}
	if r.node, err = build.NodeVersion(raw); err != nil {
		return nil, err
	}
	if installCommand == "" {
		r.js, r.jsFound, r.jsErr = build.DetectJSInstall(t, r.dir, exec.LookPath)
	}
	return r, nil
}

// checkGraphConfig checks that cfg (cleaned) is a regular file of the
// tree, reached through no link; rel is what the revision gave.
func checkGraphConfig(t *build.Tree, cfg, rel string) error {
	st, err := t.Lstat(cfg)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("graph configuration file %q is not in the uploaded source", rel)
	case err != nil:
		return fmt.Errorf("graph configuration file: %w", err)
	case !st.Mode().IsRegular():
		return fmt.Errorf("graph configuration file %q is not a regular file of the uploaded source", rel)
	}
	return nil
}

// graphConfigPath is the absolute path of the graph configuration inside
// app, checked as checkGraphConfig does (the agent is told it).
func graphConfigPath(app, rel string) (string, error) {
	clean, err := build.GraphConfigPath(rel)
	if err != nil {
		return "", err
	}
	t, err := build.OpenTree(app)
	if err != nil {
		return "", fmt.Errorf("the revision's source: %w", err)
	}
	defer t.Close()
	if err := checkGraphConfig(t, clean, rel); err != nil {
		return "", err
	}
	return filepath.Join(app, filepath.FromSlash(clean)), nil
}

// notes says in the build log which keys of the configuration the
// process runtime does not act on.
func (r *revisionProject) notes(log io.Writer) {
	if r.envNote != "" {
		fmt.Fprintf(log, "note: %s\n", r.envNote)
	}
	for _, k := range r.proj.Unsupported {
		fmt.Fprintf(log, "note: %s in %s is not supported by Slipway and is ignored\n", k, path.Base(r.cfg))
	}
	for _, k := range []struct{ key, v string }{{"base_image", r.proj.BaseImage}, {"image_distro", r.proj.ImageDistro}} {
		if k.v != "" {
			fmt.Fprintf(log, "note: %s applies to the docker runtime; the process runtime runs on this host's own system\n", k.key)
		}
	}
	if len(r.proj.DockerfileLines) > 0 {
		fmt.Fprintf(log, "note: dockerfile_lines apply to the docker runtime; the process runtime ignores them\n")
	}
}

// keep writes what the agent's start needs of the project (its env, and
// whether it runs Python) into the revision's directory, Slipway's.
func (r *revisionProject) keep(rev string) error {
	raw, err := json.Marshal(projectState{Env: r.env, Python: r.plan != nil})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(rev, projectFile), raw, 0o600); err != nil {
		return fmt.Errorf("keep the project's settings: %w", build.PlainError(err))
	}
	return nil
}
