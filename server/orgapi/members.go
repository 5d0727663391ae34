package orgapi

import (
	"github.com/julienschmidt/httprouter"

	"slipway/server/httpx"
)

// memberRoutes registers organization members, basic-auth users, login
// sessions and roles.
func (s *Store) memberRoutes(rt *httprouter.Router, prefix string, req func(httpx.Handle) httprouter.Handle, track func(string, httpx.Handle) httpx.Handle) {
}
