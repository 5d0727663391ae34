package orgapi

import (
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha512"
	"crypto/subtle"
	"fmt"

	"slipway/server/httpx"
)

// Password is a basic-auth user's password, stored as PBKDF2-HMAC-SHA512
// (the OWASP-recommended iteration count) so a copy of the database does
// not give passwords away. Only users added with a password have one.
type Password struct {
	Salt []byte `json:"salt"`
	Iter int    `json:"iter"`
	Hash []byte `json:"hash"`
}

const passwordIter = 210_000

// decoy is checked against when the email is unknown; it matches nothing
// (its hash is not the PBKDF2 of any password one would send).
var decoy = &Password{Salt: make([]byte, 16), Iter: passwordIter, Hash: make([]byte, 32)}

func hashPassword(pw string) (*Password, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return nil, fmt.Errorf("password salt: %w", err)
	}
	h, err := pbkdf2.Key(sha512.New, pw, salt, passwordIter, 32)
	if err != nil {
		return nil, fmt.Errorf("password hash: %w", err)
	}
	return &Password{Salt: salt, Iter: passwordIter, Hash: h}, nil
}

func (p *Password) matches(pw string) bool {
	h, err := pbkdf2.Key(sha512.New, pw, p.Salt, p.Iter, len(p.Hash))
	return err == nil && subtle.ConstantTimeCompare(h, p.Hash) == 1
}

func validatePassword(pw *string, loc ...any) error {
	if pw == nil {
		return nil
	}
	if n := len([]rune(*pw)); n < 12 || len(*pw) > 128 {
		return httpx.Invalid("value_error", "password must be 12 to 128 characters", loc...)
	}
	return nil
}
