package orgapi

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/julienschmidt/httprouter"
	bolt "go.etcd.io/bbolt"

	"slipway/server/audit"
	"slipway/server/auth"
	"slipway/server/httpx"
)

// Session is a basic-auth login; only the hash of its token is stored.
type Session struct {
	UserID    uuid.UUID `json:"user_id"`
	OrgID     uuid.UUID `json:"organization_id"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// SessionTTL is how long a login session lasts.
const SessionTTL = 24 * time.Hour

const sessionPrefix = "slw_ss_"

// login: POST /api/v1/login with HTTP Basic credentials or a JSON body
// {"email", "password"}. The session token it returns is used as
// Authorization: Bearer; events of such requests have a null
// credential_uid, as the spec says of session authentication.
func (s *Store) login(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	email, password, err := loginCredentials(r)
	if err != nil {
		return err
	}
	account := strings.ToLower(strings.TrimSpace(email))
	// The throttle decides before the account is looked up, so a
	// throttled answer takes as long whether or not the email exists.
	var pass *Pass
	if s.Login != nil {
		var wait time.Duration
		if pass, wait = s.Login.Attempt(s.clientAddress(r), account); pass == nil {
			return s.throttled(w, r, account, wait)
		}
	}
	u, err := s.checkPassword(account, password)
	if errors.Is(err, errBadLogin) {
		s.loginRefused(r, account, http.StatusUnauthorized, "invalid email or password")
	}
	if err != nil {
		return err
	}
	if pass != nil {
		pass.Succeeded()
	}
	token, sess, err := s.startSession(r, u)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"access_token": token, "token_type": "bearer",
		"expires_at": sess.ExpiresAt, "user_id": u.ID, "organization_id": u.OrgID})
	return nil
}

// errBadLogin answers every failed password check alike.
var errBadLogin = httpx.Unauthorized("Invalid email or password.")

// loginCredentials reads the email and password of a login: HTTP Basic
// credentials, else the JSON body.
func loginCredentials(r *http.Request) (email, password string, err error) {
	if email, password, ok := r.BasicAuth(); ok {
		return email, password, nil
	}
	var req struct {
		Email    *string `json:"email"`
		Password *string `json:"password"`
	}
	if err := httpx.DecodeJSON(r, &req, true); err != nil {
		return "", "", err
	}
	if req.Email == nil {
		return "", "", httpx.Invalid("missing", "Field required", "body", "email")
	}
	if req.Password == nil {
		return "", "", httpx.Invalid("missing", "Field required", "body", "password")
	}
	return *req.Email, *req.Password, nil
}

// checkPassword returns the basic-auth user who logs in as account if
// password is theirs.
func (s *Store) checkPassword(account, password string) (*User, error) {
	var u *User
	err := s.DB.View(func(tx *bolt.Tx) error {
		var err error
		u, err = userByLogin(tx, account)
		return err
	})
	if errors.Is(err, errNoAccount) || err == nil && u.Password == nil {
		// Spend the time a password check takes, so the answer's timing
		// does not tell which emails have an account.
		decoy.matches(password)
		return nil, errBadLogin
	}
	if err != nil {
		return nil, err
	}
	if !u.Password.matches(password) {
		return nil, errBadLogin
	}
	return u, nil
}

// startSession stores a new login session of u and returns its token,
// which is kept only as a hash, with the login's audit event in the same
// transaction.
func (s *Store) startSession(r *http.Request, u *User) (string, Session, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", Session{}, fmt.Errorf("session token: %w", err)
	}
	token := sessionPrefix + hex.EncodeToString(b[:])
	now := s.now()
	sess := Session{UserID: u.ID, OrgID: u.OrgID, CreatedAt: now, ExpiresAt: now.Add(SessionTTL)}
	err := s.update(func(tx *bolt.Tx) error {
		// The user may have been removed since the password was checked.
		if !userExists(tx, u.ID) {
			return errBadLogin
		}
		if err := putSession(tx, auth.Hash(token), &sess); err != nil {
			return err
		}
		return s.auditFor(tx, r, &auth.Principal{OrgID: u.OrgID, UserID: u.ID, Kind: auth.KindSession},
			"login", true, http.StatusOK, audit.Res(u.ID, "user"))
	})
	return token, sess, err
}

// logout: POST /api/v1/logout ends the session used for the request.
func (s *Store) logout(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	if p.Kind != auth.KindSession {
		return refused("Only a login session can be logged out; revoke API keys instead.")
	}
	token := httpx.BearerToken(r)
	if token == "" {
		// Authenticated by the dashboard's cookie (auth.CookieCredential).
		token = auth.SessionCookie(r)
	}
	if err := s.update(func(tx *bolt.Tx) error {
		if err := deleteSession(tx, auth.Hash(token)); err != nil {
			return err
		}
		return s.auditFor(tx, r, p, "logout", true, http.StatusOK, audit.Res(p.UserID, "user"))
	}); err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{})
	return nil
}
