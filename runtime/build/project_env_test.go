package build

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestEnvFileMissing: an env file the configuration names but the source
// lacks loads nothing, with ErrNoEnvFile for the build log; a link in its
// place is still refused, not taken for a missing file.
func TestEnvFileMissing(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink("/etc/hostname", filepath.Join(dir, "linked.env")); err != nil {
		t.Fatal(err)
	}
	tr, err := OpenTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	p, err := ParseProject([]byte(`{"env": ".env"}`))
	if err != nil {
		t.Fatal(err)
	}
	env, err := p.Env(tr, ".")
	if !errors.Is(err, ErrNoEnvFile) || env == nil || len(env) != 0 {
		t.Fatalf("missing .env: env %v, err %v; want an empty environment and ErrNoEnvFile", env, err)
	}
	p, _ = ParseProject([]byte(`{"env": "linked.env"}`))
	if _, err := p.Env(tr, "."); err == nil || errors.Is(err, ErrNoEnvFile) {
		t.Fatalf("a linked env file: err %v, want a refusal", err)
	}
}
