package orgapi

import (
	"github.com/julienschmidt/httprouter"

	"slipway/server/httpx"
)

// settingsRoutes registers workspace members and secrets, retention (TTL)
// settings, organization info, organization service keys and personal
// access tokens.
func (s *Store) settingsRoutes(rt *httprouter.Router, prefix string, req func(httpx.Handle) httprouter.Handle, track func(string, httpx.Handle) httpx.Handle) {
}
