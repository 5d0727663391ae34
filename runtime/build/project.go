package build

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/joho/godotenv"

	"slipway/server/cors"
)

// Project is the part of a graph configuration file (the langgraph.json
// format) that shapes a build. ParseProject checks it; nothing in it has
// touched the file system yet.
type Project struct {
	Graphs          map[string]json.RawMessage
	Dependencies    []string
	PythonVersion   string
	NodeVersion     string
	PipConfigFile   string
	PipInstaller    string
	DockerfileLines []string
	BaseImage       string
	ImageDistro     string
	// EnvMap is env given as an object; EnvFile is env given as the path
	// of a .env file (relative to the configuration's directory).
	EnvMap  map[string]string
	EnvFile string
	// CORS is http.cors, checked (parseCORS); nil when absent.
	CORS *cors.Config
	// Unsupported names the keys present that Slipway does not act on, so
	// that the build log says so instead of ignoring them silently.
	Unsupported []string
}

// knownKeys are the keys a build or the agent acts on. "http" is the
// custom routes the language hosts serve, "ui" and "ui_config" the
// generative UI the agent bundles; "$schema" (which every official
// template has) only tells editors where the format's JSON Schema is.
var knownKeys = map[string]bool{
	"$schema": true, "graphs": true, "dependencies": true, "python_version": true, "node_version": true,
	"pip_config_file": true, "pip_installer": true, "env": true, "dockerfile_lines": true,
	"base_image": true, "image_distro": true, "http": true, "ui": true, "ui_config": true,
}

var (
	pythonVersionRe = regexp.MustCompile(`^3\.[0-9]{1,2}$`)
	nodeVersionRe   = regexp.MustCompile(`^[0-9]{1,2}$`)
	envNameRe       = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// imageDistros are the image_distro values of the langgraph.json format.
var imageDistros = map[string]bool{"": true, "debian": true, "wolfi": true, "bookworm": true, "bullseye": true}

// ParseProject reads and checks a graph configuration file's build keys.
// Errors name the key, for the build log.
func ParseProject(raw []byte) (*Project, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		return nil, fmt.Errorf("graph configuration is not a valid JSON object: %w", jsonError(raw, err))
	}
	p := &Project{}
	for k := range keys {
		if !knownKeys[k] {
			p.Unsupported = append(p.Unsupported, k)
		}
	}
	sort.Strings(p.Unsupported)
	field := func(key string, into any) error {
		v, ok := keys[key]
		if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return nil
		}
		if err := json.Unmarshal(v, into); err != nil {
			return fmt.Errorf("graph configuration: %s: %w", key, err)
		}
		return nil
	}
	for key, into := range map[string]any{
		"graphs": &p.Graphs, "dependencies": &p.Dependencies, "python_version": &p.PythonVersion,
		"node_version": &p.NodeVersion, "pip_config_file": &p.PipConfigFile, "pip_installer": &p.PipInstaller,
		"dockerfile_lines": &p.DockerfileLines, "base_image": &p.BaseImage, "image_distro": &p.ImageDistro,
	} {
		if err := field(key, into); err != nil {
			return nil, err
		}
	}
	if v, ok := keys["env"]; ok {
		if err := json.Unmarshal(v, &p.EnvFile); err != nil {
			if err := json.Unmarshal(v, &p.EnvMap); err != nil {
				return nil, fmt.Errorf("graph configuration: env must be an object of strings or the path of a .env file")
			}
		}
	}
	corsCfg, err := parseCORS(keys)
	if err != nil {
		return nil, err
	}
	p.CORS = corsCfg
	if p.PythonVersion != "" && !pythonVersionRe.MatchString(p.PythonVersion) {
		return nil, fmt.Errorf("graph configuration: python_version %q must be a major.minor version such as \"3.11\"", p.PythonVersion)
	}
	if p.NodeVersion != "" && !nodeVersionRe.MatchString(p.NodeVersion) {
		return nil, fmt.Errorf("graph configuration: node_version %q must be a major version such as \"20\"", p.NodeVersion)
	}
	switch p.PipInstaller {
	case "", "auto", "pip", "uv":
	default:
		return nil, fmt.Errorf("graph configuration: pip_installer %q must be \"auto\", \"pip\" or \"uv\"", p.PipInstaller)
	}
	if !imageDistros[p.ImageDistro] {
		return nil, fmt.Errorf("graph configuration: image_distro %q must be \"debian\", \"wolfi\", \"bookworm\" or \"bullseye\"", p.ImageDistro)
	}
	for i, d := range p.Dependencies {
		if strings.TrimSpace(d) == "" || strings.ContainsAny(d, "\r\n\x00") {
			return nil, fmt.Errorf("graph configuration: dependencies[%d] %q is not a path or a requirement", i, d)
		}
		if isLocalDependency(d) {
			if _, err := LocalPath(d); err != nil {
				return nil, fmt.Errorf("graph configuration: dependencies[%d]: %w", i, err)
			}
		} else if strings.HasPrefix(d, "-") {
			// pip would take it for an option (--index-url, -e ...).
			return nil, fmt.Errorf("graph configuration: dependencies[%d] %q is an option, not a requirement; use pip_config_file for pip's options", i, d)
		}
	}
	for _, rel := range []struct{ key, v string }{{"pip_config_file", p.PipConfigFile}, {"env", p.EnvFile}} {
		if rel.v == "" {
			continue
		}
		if _, err := LocalPath(rel.v); err != nil {
			return nil, fmt.Errorf("graph configuration: %s: %w", rel.key, err)
		}
	}
	for k := range p.EnvMap {
		if !envNameRe.MatchString(k) {
			return nil, fmt.Errorf("graph configuration: env: %q is not an environment variable name", k)
		}
	}
	for i, l := range p.DockerfileLines {
		if strings.ContainsAny(l, "\r\n") {
			return nil, fmt.Errorf("graph configuration: dockerfile_lines[%d] spans several lines; give one instruction per entry", i)
		}
	}
	if strings.ContainsAny(p.BaseImage, " \t\r\n") {
		return nil, fmt.Errorf("graph configuration: base_image %q must be one image reference", p.BaseImage)
	}
	return p, nil
}

// LoadProject reads the graph configuration file cfg (slash-separated,
// relative to the tree) and returns it with its raw bytes.
func LoadProject(t *Tree, cfg string) (*Project, []byte, error) {
	raw, err := t.ReadFile(cfg, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("graph configuration: %w", err)
	}
	p, err := ParseProject(raw)
	if err != nil {
		return nil, nil, err
	}
	return p, raw, nil
}

// isLocalDependency reports a dependency that names a directory of the
// source ("." or "./pkg"), as the reference CLI tells them apart.
func isLocalDependency(d string) bool {
	return d == "." || strings.HasPrefix(d, "./") || strings.HasPrefix(d, "../") || strings.HasPrefix(d, "/") || d == ".."
}

// LocalPath cleans a path given relative to the configuration's directory
// and refuses one that leaves it: the build reads the file on the host.
func LocalPath(rel string) (string, error) {
	if path.IsAbs(rel) {
		return "", fmt.Errorf("%q must be relative to the graph configuration's directory", rel)
	}
	clean := path.Clean(rel)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%q leaves the graph configuration's directory", rel)
	}
	return clean, nil
}

// jsExtensions are the files the JavaScript host runs.
var jsExtensions = map[string]bool{".js": true, ".mjs": true, ".cjs": true, ".ts": true, ".mts": true, ".cts": true, ".tsx": true, ".jsx": true}

// graphFile is the file (or module) part of a graph's spec in
// langgraph.json: "./agent.py:graph", "pkg.module:graph", or an object
// {"path": "./agent.py:graph", "description": ...}.
func graphFile(raw json.RawMessage) (string, bool) {
	var spec string
	if json.Unmarshal(raw, &spec) != nil {
		var obj struct {
			Path string `json:"path"`
		}
		if json.Unmarshal(raw, &obj) != nil {
			return "", false
		}
		spec = obj.Path
	}
	file, _, ok := strings.Cut(spec, ":")
	return file, ok
}

// PythonSpec reports whether a graph is given as a Python spec: a .py
// file ("./agent.py:graph") or an importable module ("pkg.module:graph").
func PythonSpec(raw json.RawMessage) bool {
	file, ok := graphFile(raw)
	if !ok {
		return false
	}
	ext := path.Ext(file)
	return ext == ".py" || (!jsExtensions[ext] && !strings.Contains(file, "/"))
}

// PythonGraphs reports whether any graph is a Python spec (PythonSpec).
func (p *Project) PythonGraphs() bool {
	for _, raw := range p.Graphs {
		if PythonSpec(raw) {
			return true
		}
	}
	return false
}

// JSGraphs reports whether a graph is given as a JavaScript or
// TypeScript file ("./src/agent.ts:graph"), which the JavaScript host runs.
func (p *Project) JSGraphs() bool {
	for _, raw := range p.Graphs {
		if file, ok := graphFile(raw); ok && jsExtensions[path.Ext(file)] {
			return true
		}
	}
	return false
}

// NeedsPython reports whether the project is built with a Python
// environment: it has Python graphs or asks for a Python version.
func (p *Project) NeedsPython() bool {
	return p.PythonVersion != "" || p.PythonGraphs()
}

// Env is the project's environment (env), read from its .env file of the
// tree when env names one; dir is the configuration's directory in the
// tree. An env file holds secrets: errors say which line is wrong, never
// what it holds (see envSyntax).
func (p *Project) Env(t *Tree, dir string) (map[string]string, error) {
	if p.EnvFile == "" {
		return p.EnvMap, nil
	}
	rel, err := LocalPath(p.EnvFile)
	if err != nil {
		return nil, fmt.Errorf("env: %w", err)
	}
	name := pathJoin(dir, rel)
	raw, err := t.ReadFile(name, maxProjectFile)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, fmt.Errorf("env file %s: %w", name, ErrNoEnvFile)
	}
	if err != nil {
		return nil, fmt.Errorf("env file: %w", err)
	}
	return ParseEnv(name, raw)
}

// ErrNoEnvFile: the env file the configuration names is not in the
// source. The reference servers load nothing then, and so does Slipway:
// every official template names a ".env" that deploy clients never upload
// (its values are secrets). Env returns it with an empty environment; the
// build says so in its log and goes on.
var ErrNoEnvFile = errors.New("not in the uploaded source (deploy clients never upload .env files: give its values as the deployment's secrets); nothing is loaded from it")

// ParseEnv parses the .env file name (as the project names it, for
// errors) of contents raw, as godotenv does. Errors say which line is
// wrong, never what it holds.
func ParseEnv(name string, raw []byte) (map[string]string, error) {
	m, err := godotenv.UnmarshalBytes(raw)
	if err != nil {
		return nil, fmt.Errorf("env file %s: %s", name, envSyntax(raw, err))
	}
	if _, ok := m[""]; ok {
		// godotenv takes a line without '=' for a value without a name.
		return nil, fmt.Errorf("env file %s: a line has no variable name (expected NAME=value)", name)
	}
	return m, nil
}
