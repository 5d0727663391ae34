package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"slipway/runtime/build"
)

// Project is what the graph configuration (langgraph.json) says besides
// its graphs: the environment it gives the graphs and its custom routes.
type Project struct {
	// Env is "env": an object, or the path of a .env file relative to
	// the configuration.
	Env map[string]string
	// HTTPApp is "http": {"app": "./src/app.ts:app"}, an app (Hono's
	// fetch interface) the language host serves for every path the agent
	// API does not own; "" when none.
	HTTPApp string
	// Disabled are the agent API's route groups "http" turns off with the
	// reference's disable_* keys: "assistants", "threads", "runs",
	// "store", "meta" (see agentapi.API.Disabled).
	Disabled []string
	// UI is "ui": graph id → the TSX/JSX file of its generative UI
	// components, relative to the configuration; UIShared is
	// "ui_config": {"shared": [...]}, more modules the page provides.
	UI       map[string]string
	UIShared []string
	// TTL is "checkpointer": {"ttl": {...}}, the threads' time-to-live
	// (ttl.go).
	TTL TTLConfig
}

// LoadProject reads the project settings of the graph configuration at
// path ("" is an empty project).
func LoadProject(path string) (Project, error) {
	var p Project
	if path == "" {
		return p, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return p, fmt.Errorf("read graph configuration: %w", err)
	}
	var cfg struct {
		UI       map[string]string `json:"ui"`
		UIConfig *struct {
			Shared []string `json:"shared"`
		} `json:"ui_config"`
		Env          json.RawMessage `json:"env"`
		Checkpointer json.RawMessage `json:"checkpointer"`
		HTTP         *struct {
			App               string `json:"app"`
			DisableAssistants bool   `json:"disable_assistants"`
			DisableThreads    bool   `json:"disable_threads"`
			DisableRuns       bool   `json:"disable_runs"`
			DisableStore      bool   `json:"disable_store"`
			DisableMeta       bool   `json:"disable_meta"`
			DisableUI         bool   `json:"disable_ui"`
		} `json:"http"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return p, fmt.Errorf("graph configuration %s: %w", path, err)
	}
	if cfg.HTTP != nil && cfg.HTTP.App != "" {
		if i := strings.LastIndex(cfg.HTTP.App, ":"); i <= 0 || i == len(cfg.HTTP.App)-1 {
			return p, fmt.Errorf("graph configuration %s: http.app %q is not \"path:export\"", path, cfg.HTTP.App)
		}
		p.HTTPApp = cfg.HTTP.App
	}
	if h := cfg.HTTP; h != nil {
		for name, off := range map[string]bool{"assistants": h.DisableAssistants, "threads": h.DisableThreads,
			"runs": h.DisableRuns, "store": h.DisableStore, "meta": h.DisableMeta, "ui": h.DisableUI} {
			if off {
				p.Disabled = append(p.Disabled, name)
			}
		}
		slices.Sort(p.Disabled)
	}
	if p.TTL, err = ParseTTLConfig(cfg.Checkpointer); err != nil {
		return p, fmt.Errorf("graph configuration %s: %w", path, err)
	}
	p.UI = cfg.UI
	if cfg.UIConfig != nil {
		p.UIShared = cfg.UIConfig.Shared
	}
	env := strings.TrimSpace(string(cfg.Env))
	switch {
	case env == "" || env == "null":
	case strings.HasPrefix(env, "{"):
		if err := json.Unmarshal(cfg.Env, &p.Env); err != nil {
			return p, fmt.Errorf("graph configuration %s: env must be an object of strings or a .env file's path: %w", path, err)
		}
	default:
		var file string
		if err := json.Unmarshal(cfg.Env, &file); err != nil {
			return p, fmt.Errorf("graph configuration %s: env must be an object of strings or a .env file's path", path)
		}
		if !filepath.IsAbs(file) {
			file = filepath.Join(filepath.Dir(path), file)
		}
		raw, err := os.ReadFile(file)
		if errors.Is(err, fs.ErrNotExist) {
			// As the reference servers: a missing env file loads nothing
			// (deploy clients never upload .env; its values are secrets).
			return p, nil
		}
		if err != nil {
			return p, fmt.Errorf("graph configuration %s: env file: %w", path, err)
		}
		// An env file holds secrets: its errors say the line, not the text.
		if p.Env, err = build.ParseEnv(file, raw); err != nil {
			return p, fmt.Errorf("graph configuration %s: %w", path, err)
		}
	}
	return p, nil
}

// ApplyEnv sets the project's environment in this process, where graphs
// and language hosts inherit it. A variable the process already has wins,
// as with dotenv: a deployment's secrets override the file's defaults.
func (p Project) ApplyEnv() error {
	for k, v := range p.Env {
		if _, ok := os.LookupEnv(k); ok {
			continue
		}
		if err := os.Setenv(k, v); err != nil {
			return fmt.Errorf("env %s: %w", k, err)
		}
	}
	return nil
}

// DefaultConfigs parses LANGGRAPH_CONFIG, a JSON object of graph id →
// config, the configuration of each graph's system assistant (the
// reference servers read the same variable).
func DefaultConfigs(v string) (map[string]map[string]any, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var out map[string]map[string]any
	if err := json.Unmarshal([]byte(v), &out); err != nil {
		return nil, fmt.Errorf("LANGGRAPH_CONFIG must be a JSON object of graph id → config: %w", err)
	}
	return out, nil
}
