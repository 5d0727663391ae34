package storage

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Sealer encrypts secrets at rest with AES-256-GCM under a key derived from
// the master key, so a copy of the database alone reveals no secret value.
type Sealer struct {
	aead   cipher.AEAD
	master []byte
}

// NewSealer derives the secret-encryption key from a 32-byte master key.
func NewSealer(master []byte) (*Sealer, error) {
	if len(master) != 32 {
		return nil, fmt.Errorf("master key must be 32 bytes, got %d", len(master))
	}
	block, err := aes.NewCipher(Derive(master, "slipway secrets v1"))
	if err != nil {
		return nil, fmt.Errorf("aes: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("gcm: %w", err)
	}
	return &Sealer{aead: aead, master: master}, nil
}

// Derive returns an HMAC-SHA256 sub-key of master for one purpose, so each
// use (secrets, audit chain, upload signatures) has its own key.
func Derive(master []byte, purpose string) []byte {
	m := hmac.New(sha256.New, master)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

// Key returns a sub-key of the master key for purpose.
func (s *Sealer) Key(purpose string) []byte { return Derive(s.master, purpose) }

// Seal encrypts plaintext; aad binds the ciphertext to its owner (e.g. the
// deployment id and secret name) so it cannot be moved to another record.
func (s *Sealer) Seal(plaintext, aad string) string {
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic(fmt.Errorf("random nonce: %w", err))
	}
	out := s.aead.Seal(nonce, nonce, []byte(plaintext), []byte(aad))
	return base64.RawStdEncoding.EncodeToString(out)
}

// Open decrypts a value produced by Seal with the same aad.
func (s *Sealer) Open(sealed, aad string) (string, error) {
	raw, err := base64.RawStdEncoding.DecodeString(sealed)
	if err != nil {
		return "", fmt.Errorf("sealed value: %w", err)
	}
	n := s.aead.NonceSize()
	if len(raw) < n {
		return "", errors.New("sealed value too short")
	}
	pt, err := s.aead.Open(nil, raw[:n], raw[n:], []byte(aad))
	if err != nil {
		return "", fmt.Errorf("decrypt: %w", err)
	}
	return string(pt), nil
}

// ParseKey decodes a 32-byte key given as 64 hex characters or base64.
func ParseKey(s string) ([]byte, error) {
	if k, err := hex.DecodeString(s); err == nil && len(k) == 32 {
		return k, nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil && len(k) == 32 {
			return k, nil
		}
	}
	return nil, errors.New("must be 32 bytes as 64 hex characters or base64")
}

// LoadMasterKey returns the master key from the named file, or from
// <dataDir>/master.key, generating the latter with mode 0600 when none
// exists. The file holds 64 hex characters or base64 of 32 bytes (ParseKey).
func LoadMasterKey(file, dataDir string) ([]byte, error) {
	path := file
	if path == "" {
		path = filepath.Join(dataDir, "master.key")
	}
	raw, err := os.ReadFile(path)
	if err == nil {
		k, err := ParseKey(strings.TrimSpace(string(raw)))
		if err != nil {
			return nil, fmt.Errorf("master key file %s: %w", path, err)
		}
		return k, nil
	}
	if !errors.Is(err, os.ErrNotExist) || file != "" {
		return nil, fmt.Errorf("read master key: %w", err)
	}
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("generate master key: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create master key: %w", err)
	}
	_, werr := f.WriteString(hex.EncodeToString(k) + "\n")
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		return nil, fmt.Errorf("write master key: %w", err)
	}
	return k, nil
}
