package storage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSealRoundTripAndBinding(t *testing.T) {
	s, err := NewSealer(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	sealed := s.Seal("hunter2", "dep1/PASSWORD")
	if strings.Contains(sealed, "hunter2") {
		t.Fatal("plaintext visible")
	}
	if got, err := s.Open(sealed, "dep1/PASSWORD"); err != nil || got != "hunter2" {
		t.Fatalf("open = %q, %v", got, err)
	}
	if _, err := s.Open(sealed, "dep2/PASSWORD"); err == nil {
		t.Fatal("ciphertext opened under another owner")
	}
}

func TestLoadMasterKeyGeneratesOnce(t *testing.T) {
	dir := t.TempDir()
	k1, err := LoadMasterKey("", "", dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, "master.key"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("stat = %v, %v", st, err)
	}
	k2, err := LoadMasterKey("", "", dir)
	if err != nil || string(k1) != string(k2) {
		t.Fatal("key changed between loads")
	}
	if _, err := LoadMasterKey("short", "", dir); err == nil {
		t.Fatal("short literal accepted")
	}
	if _, err := LoadMasterKey("", filepath.Join(dir, "missing"), dir); err == nil {
		t.Fatal("missing named file accepted")
	}
}
