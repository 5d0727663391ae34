package controlplane

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"slipway/server/httpx"
)

// githubInstall: GET /v1/integrations/github/install. GitHub App
// installations exist only on the hosted cloud (the `github` source is
// cloud-only), so a self-hosted install has none: the list is empty, which
// is what a client iterating installations expects.
func (s *Service) githubInstall(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	httpx.WriteJSON(w, http.StatusOK, []GithubIntegration{})
	return nil
}
