// Package py is the Python language host: its source (embedded in the
// binary and written to the agent's data directory at start-up), the
// recognition of Python graph specs, and the choice of the interpreter
// that runs it.
package py

import (
	"embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"slipway/runtime/agent/hosts"
)

//go:embed host.py slipway_saver.py slipway_store.py slipway_factory.py
var source embed.FS

var host = hosts.Source{FS: source, Files: []string{"host.py", "slipway_saver.py", "slipway_store.py", "slipway_factory.py"}, Name: "the Python host"}

// module matches an importable dotted module name ("my_pkg.module").
var module = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// Handles reports whether the path of a "path:attr" graph names Python
// code: a .py file, or a module importable from the project
// ("my_pkg.module", the form the reference loader also takes).
func Handles(path string) bool {
	if strings.EqualFold(filepath.Ext(path), ".py") {
		return true
	}
	return module.MatchString(path)
}

// Graph is one graph of the project (or its custom routes' app).
type Graph = hosts.Graph

type config struct {
	ProjectDir string               `json:"project_dir"`
	Graphs     map[string]hostGraph `json:"graphs"`
	HTTPApp    *hostGraph           `json:"http_app,omitempty"`
}

type hostGraph struct {
	File   string `json:"file,omitempty"`   // a file to import
	Module string `json:"module,omitempty"` // or a module to import
	Export string `json:"export"`
	Source string `json:"source"` // the spec the user wrote, for messages
}

// Interpreter chooses the Python that runs the host: explicit (the
// agent's SLIPWAY_AGENT_PYTHON, set e.g. by a runtime that built the
// revision's virtualenv), else the project's virtualenv (.venv or venv
// beside langgraph.json), else python3 on PATH.
func Interpreter(explicit, projectDir string) (string, error) {
	if explicit != "" {
		p, err := exec.LookPath(explicit)
		if err != nil {
			return "", fmt.Errorf("SLIPWAY_AGENT_PYTHON: %w", err)
		}
		return p, nil
	}
	for _, venv := range []string{".venv", "venv"} {
		p := filepath.Join(projectDir, venv, "bin", "python")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath("python3")
	if err != nil {
		return "", errors.New("Python graphs need an interpreter: no .venv or venv beside langgraph.json, no SLIPWAY_AGENT_PYTHON and no python3 on PATH")
	}
	return p, nil
}

// Prepare writes the host's files under dataDir and returns the command
// that starts the host with the interpreter python. projectDir is the
// directory of the graph configuration (put first on sys.path, as the
// reference server does).
//
// app, when not nil, is the custom route app (an ASGI application) the
// host serves.
func Prepare(dataDir, projectDir, python string, graphs []Graph, app *Graph) ([]string, error) {
	hostDir := filepath.Join(dataDir, "hosts", "py", host.Version())
	if err := host.Write(hostDir); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(projectDir)
	if err != nil {
		return nil, err
	}
	cfg := config{ProjectDir: abs, Graphs: map[string]hostGraph{}}
	for _, g := range graphs {
		hg, err := spec(abs, g)
		if err != nil {
			return nil, err
		}
		cfg.Graphs[g.ID] = hg
	}
	if app != nil {
		hg, err := spec(abs, *app)
		if err != nil {
			return nil, err
		}
		cfg.HTTPApp = &hg
	}
	cfgPath, err := hosts.WriteConfig(dataDir, "py", "Python", cfg)
	if err != nil {
		return nil, err
	}
	// -u: unbuffered stderr lines reach the agent's log as they are written.
	return []string{python, "-u", filepath.Join(hostDir, "host.py"), cfgPath}, nil
}

// spec is what the host imports for g: a file, or a module.
func spec(projectDir string, g Graph) (hostGraph, error) {
	hg := hostGraph{Export: g.Export, Source: g.Path + ":" + g.Export}
	if !strings.EqualFold(filepath.Ext(g.Path), ".py") {
		hg.Module = g.Path
		return hg, nil
	}
	file := g.Path
	if !filepath.IsAbs(file) {
		file = filepath.Join(projectDir, file)
	}
	if _, err := os.Stat(file); err != nil {
		return hg, fmt.Errorf("graph %q: %s: %w", g.ID, g.Path, err)
	}
	hg.File = file
	return hg, nil
}
