package dashboard

import (
	"net/http"
	"net/netip"

	bolt "go.etcd.io/bbolt"

	"slipway/server/audit"
	"slipway/server/auth"
	"slipway/server/httpx"
	"slipway/server/track"
)

// Sign-in and sign-out in the audit log, as `login` and `logout` API
// Activity events in the organization of the credential. A password
// sign-in and a session's sign-out go through the API's own login and
// logout (dashboard.call), which record them in the transaction that
// starts or ends the session, naming /ui/session or /ui/signout (track.Via).
// A sign-in with an API key starts nothing and its sign-out ends nothing
// (the key stays valid until revoked), so the dashboard records those
// itself, with the key's id as credential_uid. A key that does not
// authenticate names no organization: that refusal is in Slipway's log
// only, without the key.

// recordKey records op for the API key whose principal is p, in a
// transaction of its own. It fails the request when the event cannot be
// written: no sign-in goes unrecorded.
func (d *Dashboard) recordKey(r *http.Request, p *auth.Principal, op string) error {
	if d.Audit == nil {
		return nil
	}
	return d.Audit.Update(func(tx *bolt.Tx) error {
		return d.Audit.AppendFor(tx, r, p, op, true, http.StatusOK, "", audit.Res(p.UserID, "user"))
	})
}

// keyRefused logs a sign-in refused for an API key that does not
// authenticate.
func (d *Dashboard) keyRefused(r *http.Request, err error) {
	status, detail := track.Describe(err)
	httpx.LogFrom(r).Warn().Str("client", d.clientAddress(r)).Int("status", status).Str("detail", detail).
		Msg("dashboard sign-in with an API key refused")
}

// clientAddress is the address the audit log would record for r.
func (d *Dashboard) clientAddress(r *http.Request) string {
	var trusted []netip.Prefix
	if d.Audit != nil {
		trusted = d.Audit.Trusted
	}
	ip, _, _ := track.ClientAddress(r, trusted)
	return ip
}

// credentialOf resolves a credential pasted at sign-in or held by the
// dashboard's cookie, as the API would for a request that sends it; ""
// resolves to nothing.
func (d *Dashboard) credentialOf(r *http.Request, key string) (*auth.Principal, error) {
	if key == "" {
		return nil, httpx.Unauthorized("Not signed in.")
	}
	check, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "/ui/session", nil)
	check.Header.Set("X-Api-Key", key)
	return d.Auth.Authenticate(check)
}
