package orgapi

import (
	"context"
	"errors"
	"net/http"

	bolt "go.etcd.io/bbolt"

	"slipway/server/audit"
	"slipway/server/auth"
	"slipway/server/httpx"
)

// Logins and logouts in the audit log. They are API Activity events (OCSF
// class 6003) like every other: the spec's query API returns that class
// only. The operation is `login` (the hosted service's name for it) or
// `logout`; the actor is the account that signed in or out, with a null
// credential_uid for a password login (a session, as the spec says).
//
// A successful login or logout is recorded in the transaction that starts
// or ends the session. A refused login is recorded in the organization of
// the account its email names, after the answer (recordRefusedLogin), and
// one whose email names no account is recorded in no organization's log,
// only in Slipway's: no organization owns it, and writing it anywhere
// would let anyone grow a chain with made-up emails.

// auditFor records op with p as the actor inside tx; a store without an
// audit log (some unit tests) records nothing.
func (s *Store) auditFor(tx *bolt.Tx, r *http.Request, p *auth.Principal, op string, ok bool, status int,
	res ...audit.Resource) error {
	if s.Audit == nil {
		return nil
	}
	return s.Audit.AppendFor(tx, r, p, op, ok, status, "", res...)
}

// loginRefused logs a login refused for a wrong email or password and
// records it in the claimed account's organization.
func (s *Store) loginRefused(r *http.Request, account string, status int, detail string) {
	httpx.LogFrom(r).Warn().Str("client", s.clientAddress(r)).Str("email", truncate(account, 254)).
		Msg("login failed")
	s.recordRefusedLogin(r, account, status, detail, false)
}

// recordRefusedLogin records a refused login as a Failure `login` event in
// the organization of the account the email names, if any. It looks the
// account up and writes after the answer has gone, so that the answer
// takes as long whether or not the email exists (a write transaction
// takes far longer than the decoy password check). A throttled attempt is
// recorded once per window and account (LoginThrottle.AuditThrottled);
// refused passwords are bounded by the throttle itself.
func (s *Store) recordRefusedLogin(r *http.Request, account string, status int, detail string, throttled bool) {
	if s.Audit == nil {
		return
	}
	// The request ends when the handler returns: keep what the event needs.
	rec := r.Clone(context.WithoutCancel(r.Context()))
	go func() {
		var u *User
		err := s.DB.View(func(tx *bolt.Tx) error {
			var err error
			u, err = userByLogin(tx, account)
			return err
		})
		if err == nil && throttled && s.Login != nil && !s.Login.AuditThrottled(account) {
			return
		}
		if err == nil {
			err = s.Audit.Refused(rec, "login", u.OrgID, u.ID, status, detail)
		}
		if err != nil && !errors.Is(err, errNoAccount) {
			httpx.LogFrom(rec).Error().Err(err).Msg("audit: could not record a refused login")
		}
	}()
}
