package orgapi

import (
	"encoding/hex"
	"net/http"
	"strconv"

	"slipway/server/auth"
	"slipway/server/httpx"
)

// CheckSignInKey checks an API key or token pasted at the dashboard's
// sign-in (POST /ui/session) and is throttled like a password login
// (POST /api/v1/login): each attempt takes a token from the client
// address's bucket and from one kept for the key itself, in the same
// LoginThrottle, so failed key and password sign-ins from one address add
// up. A key that works gives its tokens back. Throttled, it answers 429
// with Retry-After before looking the key up.
func (s *Store) CheckSignInKey(w http.ResponseWriter, r *http.Request, key string) (*auth.Principal, error) {
	var pass *Pass
	if s.Login != nil {
		// The key's bucket is named by its hash (the throttle keeps names
		// in memory), in a namespace no email can reach.
		account := "\x00key\x00" + hex.EncodeToString(auth.Hash(key)[:16])
		p, d := s.Login.Attempt(s.clientAddress(r), account)
		if p == nil {
			secs := retryAfter(d)
			httpx.LogFrom(r).Warn().Str("client", s.clientAddress(r)).Int("retry_after", secs).Msg("API key sign-in throttled")
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			return nil, httpx.Errorf(http.StatusTooManyRequests, "Too many failed sign-ins; try again in %d seconds.", secs)
		}
		pass = p
	}
	check, err := http.NewRequestWithContext(r.Context(), http.MethodGet, "/ui/session", nil)
	if err != nil {
		return nil, err
	}
	check.Header.Set("X-Api-Key", key)
	p, err := s.Authenticate(check)
	if err != nil {
		return nil, err
	}
	if pass != nil {
		pass.Succeeded()
	}
	return p, nil
}
