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
	k1, err := LoadMasterKey("", dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, "master.key"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("stat = %v, %v", st, err)
	}
	k2, err := LoadMasterKey("", dir)
	if err != nil || string(k1) != string(k2) {
		t.Fatal("key changed between loads")
	}
	if _, err := ParseKey("short"); err == nil {
		t.Fatal("short literal accepted")
	}
	if _, err := LoadMasterKey(filepath.Join(dir, "missing"), dir); err == nil {
		t.Fatal("missing named file accepted")
	}
}

func TestParseKey(t *testing.T) {
	hexKey := strings.Repeat("ab", 32)
	cases := []struct {
		name, in string
		ok       bool
	}{
		{"hex", hexKey, true},
		{"base64", "q6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s=", true},
		{"raw url base64", "q6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s", true},
		{"short hex", hexKey[:62], false},
		{"empty", "", false},
		{"not a key", "hunter2", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, err := ParseKey(tc.in)
			if (err == nil) != tc.ok || err == nil && len(k) != 32 {
				t.Fatalf("ParseKey(%q) = %x, %v; want ok=%t", tc.in, k, err, tc.ok)
			}
			if err != nil && strings.Contains(err.Error(), "SLIPWAY_") {
				t.Fatalf("the error names a setting: %v", err)
			}
		})
	}
}

func FuzzParseKey(f *testing.F) {
	f.Add(strings.Repeat("0", 64))
	f.Add("q6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s=")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		if k, err := ParseKey(s); err == nil && len(k) != 32 {
			t.Fatalf("ParseKey(%q) gave %d bytes", s, len(k))
		}
	})
}
