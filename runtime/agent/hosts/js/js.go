// Package js is the JavaScript language host: its source (embedded in the
// binary and written to the agent's data directory at start-up) and the
// preparation of a project's graphs for it, TypeScript included.
package js

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/evanw/esbuild/pkg/api"

	"slipway/runtime/agent/hosts"
)

//go:embed host.mjs hooks.mjs saver.mjs store.mjs schemas.mjs
var source embed.FS

var host = hosts.Source{FS: source, Files: []string{"host.mjs", "hooks.mjs", "saver.mjs", "store.mjs", "schemas.mjs"}, Name: "the JavaScript host"}

// Extensions are the file extensions of graphs this host serves.
var Extensions = []string{".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".tsx", ".jsx"}

// Handles reports whether a "path:attr" graph names a JavaScript or TypeScript file.
func Handles(path string) bool {
	ext := strings.ToLower(filepath.Ext(path))
	for _, e := range Extensions {
		if ext == e {
			return true
		}
	}
	return false
}

// Graph is one graph of the project (or its custom routes' app).
type Graph = hosts.Graph

// config is what host.mjs reads at start.
type config struct {
	ProjectDir string               `json:"project_dir"`
	Graphs     map[string]hostGraph `json:"graphs"`
	HTTP       *hostGraph           `json:"http,omitempty"` // the custom routes' app
}

type hostGraph struct {
	File   string `json:"file"`   // what the host imports
	Export string `json:"export"` // the exported name
	Source string `json:"source"` // the path the user wrote, for messages
}

// Prepare writes the host's files under dataDir, transpiles TypeScript
// graphs, and returns the command that starts the host. projectDir is the
// directory of the graph configuration (where node_modules is found).
//
// TypeScript is transpiled with esbuild's Go API rather than a loader in
// node: the user needs nothing in their project, and start-up does not pay
// for a TypeScript loader. Each TypeScript graph is bundled with its local
// imports (packages stay imports, resolved from the project by the host's
// hook) into <dataDir>/hosts/js/cache/<content hash>.mjs, so an unchanged
// project reuses its output. app, when not nil, is the project's custom
// routes (an app with a fetch method, such as Hono's), loaded like a graph.
func Prepare(dataDir, projectDir string, graphs []Graph, app *Graph) ([]string, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, errors.New("JavaScript graphs need node on PATH (the deployment's Node.js), and none was found")
	}
	hostDir := filepath.Join(dataDir, "hosts", "js", host.Version())
	if err := host.Write(hostDir); err != nil {
		return nil, err
	}
	cacheDir := filepath.Join(dataDir, "hosts", "js", "cache")
	cfg := config{ProjectDir: projectDir, Graphs: map[string]hostGraph{}}
	entry := func(what, p string) (string, error) {
		file := p
		if !filepath.IsAbs(file) {
			file = filepath.Join(projectDir, file)
		}
		if _, err := os.Stat(file); err != nil {
			return "", fmt.Errorf("%s: %s: %w", what, p, err)
		}
		switch strings.ToLower(filepath.Ext(file)) {
		case ".ts", ".mts", ".cts", ".tsx", ".jsx":
			out, err := transpile(file, projectDir, cacheDir)
			if err != nil {
				return "", fmt.Errorf("%s: %w", what, err)
			}
			file = out
		}
		return file, nil
	}
	for _, g := range graphs {
		file, err := entry(fmt.Sprintf("graph %q", g.ID), g.Path)
		if err != nil {
			return nil, err
		}
		cfg.Graphs[g.ID] = hostGraph{File: file, Export: g.Export, Source: g.Path}
	}
	if app != nil {
		file, err := entry("http.app", app.Path)
		if err != nil {
			return nil, err
		}
		cfg.HTTP = &hostGraph{File: file, Export: app.Export, Source: app.Path}
	}
	cfgPath, err := hosts.WriteConfig(dataDir, "js", "JavaScript", cfg)
	if err != nil {
		return nil, err
	}
	return []string{node, filepath.Join(hostDir, "host.mjs"), cfgPath}, nil
}

// transpile bundles a TypeScript entry with its local imports into the cache.
func transpile(entry, projectDir, cacheDir string) (string, error) {
	res := api.Build(api.BuildOptions{
		EntryPoints:   []string{entry},
		AbsWorkingDir: projectDir,
		Bundle:        true,
		Packages:      api.PackagesExternal,
		Format:        api.FormatESModule,
		Platform:      api.PlatformNode,
		Target:        api.ES2022,
		Sourcemap:     api.SourceMapInline,
		LogLevel:      api.LogLevelSilent,
		Write:         false,
	})
	if len(res.Errors) > 0 {
		msgs := api.FormatMessages(res.Errors, api.FormatMessagesOptions{Kind: api.ErrorMessage})
		return "", fmt.Errorf("TypeScript transpilation failed:\n%s", strings.Join(msgs, ""))
	}
	if len(res.OutputFiles) != 1 {
		return "", fmt.Errorf("TypeScript transpilation of %s produced %d files, want 1", entry, len(res.OutputFiles))
	}
	code := res.OutputFiles[0].Contents
	sum := sha256.Sum256(code)
	out := filepath.Join(cacheDir, hex.EncodeToString(sum[:16])+".mjs")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := os.MkdirAll(cacheDir, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", cacheDir, err)
	}
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, code, 0o600); err != nil {
		return "", fmt.Errorf("write transpiled graph: %w", err)
	}
	return out, os.Rename(tmp, out)
}
