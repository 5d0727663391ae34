package hosts

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Graph is one "path:export" entry a host loads: a graph of the project,
// or its custom routes' app.
type Graph struct {
	ID     string
	Path   string // as written in the configuration: ./src/agent.ts, ./agent.py, my_pkg.module
	Export string
}

// Source is a language host's program, embedded in the binary and written
// to the agent's data directory at start-up.
type Source struct {
	FS    fs.ReadFileFS
	Files []string
	Name  string // for messages: "the Python host"
}

// Version names the source by its content, so a new binary never runs an
// old host left in the data directory.
func (s Source) Version() string {
	h := sha256.New()
	for _, name := range s.Files {
		b, _ := s.FS.ReadFile(name)
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Write writes the source's files into dir.
func (s Source) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	for _, name := range s.Files {
		b, err := s.FS.ReadFile(name)
		if err != nil {
			return err
		}
		// Write then rename: a concurrent reader never sees half a file.
		tmp := filepath.Join(dir, name+".tmp")
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", s.Name, err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("write %s: %w", s.Name, err)
		}
	}
	return nil
}
