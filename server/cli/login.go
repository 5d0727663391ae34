package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// fileConfig is what `slipway login` stores: where to talk and with which
// key. The file is the user's own (mode 0600 in a 0700 directory) since it
// holds a credential.
type fileConfig struct {
	URL       string `json:"url,omitempty"`
	APIKey    string `json:"api_key,omitempty"`
	Workspace string `json:"workspace,omitempty"`
}

// configPath is os.UserConfigDir()/slipway/config.json ("" when the
// platform has no configuration directory).
func (a *app) configPath() string {
	dir := a.env.ConfigDir
	if dir == "" {
		var err error
		if dir, err = os.UserConfigDir(); err != nil {
			return ""
		}
	}
	return filepath.Join(dir, "slipway", "config.json")
}

func loadConfig(path string) (fileConfig, error) {
	var c fileConfig
	if path == "" {
		return c, nil
	}
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fail(ExitUsage, "cannot read the login settings %s: %v", path, err)
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, fail(ExitUsage, "the login settings %s are not valid JSON (%v); run slipway login again", path, err)
	}
	return c, nil
}

// saveConfig writes the file whole through a temporary file in the same
// directory, created 0600, so that the key is never readable by others,
// not even for a moment, and a crash leaves the old file.
func saveConfig(path string, c fileConfig) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	raw, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config-*.json")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(append(raw, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(tmp.Name(), path)
}

// login: slipway login [--url U] [--api-key K] [--workspace W] — checks the
// key against the server, then stores the settings. Without a key on the
// command line or in SLIPWAY_API_KEY it reads one line from stdin, so the
// key need not appear in the shell history.
func (a *app) login(ctx context.Context, args []string) error {
	fs := a.flags("login", "[--url URL] [--api-key KEY] [--workspace ID]")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	path := a.configPath()
	if path == "" {
		return fail(ExitUsage, "this system has no user configuration directory (set HOME or XDG_CONFIG_HOME)")
	}
	if err := a.connect(); err != nil {
		return err
	}
	if a.apiKey == "" {
		if tty(a.env.Stdin) {
			fmt.Fprint(a.env.Stderr, "API key: ")
		}
		line, err := bufio.NewReader(a.env.Stdin).ReadString('\n')
		a.apiKey = strings.TrimSpace(line)
		if a.apiKey == "" {
			return fail(ExitUsage, "no API key given: pass --api-key, set SLIPWAY_API_KEY or type it on standard input (%v)", err)
		}
		a.client.APIKey = a.apiKey
	}
	// Any authenticated read proves the key; the deployment list is one
	// every workspace key may make.
	if err := a.client.Do(ctx, http.MethodGet, "/v2/deployments?limit=1", nil, nil); err != nil {
		return err
	}
	if err := saveConfig(path, fileConfig{URL: a.url, APIKey: a.apiKey, Workspace: a.workspace}); err != nil {
		return err
	}
	fmt.Fprintf(a.env.Stdout, "Logged in to %s; settings saved in %s\n", a.url, path)
	return nil
}
