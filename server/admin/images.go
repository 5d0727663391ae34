package admin

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"slipway/server/httpx"
)

// `slipway images` works on the install's images: it asks the running
// server for the install's id (GET /v1/instance), which names and labels
// them, and has the server prune them (POST /v1/images/prune), which
// waits for the builds it is running.

// InstanceResponse is the answer of GET /v1/instance.
type InstanceResponse struct {
	InstanceID string `json:"instance_id"`
}

// PruneImagesResponse is the answer of POST /v1/images/prune: the images
// and cached root filesystems removed.
type PruneImagesResponse struct {
	Removed []string `json:"removed"`
}

func (s *Server) instance(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) error {
	httpx.WriteJSON(w, http.StatusOK, InstanceResponse{InstanceID: s.Instance})
	return nil
}

func (s *Server) pruneImages(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if s.PruneImages == nil {
		return httpx.Conflict("The server does not run the docker runtime: it has no images to prune.")
	}
	removed, err := s.PruneImages(r.Context())
	if err != nil {
		return err
	}
	if removed == nil {
		removed = []string{}
	}
	httpx.WriteJSON(w, http.StatusOK, PruneImagesResponse{Removed: removed})
	return nil
}
