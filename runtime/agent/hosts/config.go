package hosts

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// WriteConfig writes a language host's configuration, cfg as JSON, to
// <dataDir>/hosts/<dir>/config.json, readable by Slipway's user only, and
// returns its path, which the host takes as its argument. language names
// the host in an error ("JavaScript", "Python").
func WriteConfig(dataDir, dir, language string, cfg any) (string, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return "", fmt.Errorf("encode the %s host's configuration: %w", language, err)
	}
	path := filepath.Join(dataDir, "hosts", dir, "config.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return "", fmt.Errorf("write the %s host's configuration: %w", language, err)
	}
	return path, nil
}
