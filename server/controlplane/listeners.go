package controlplane

import (
	"net/http"

	"github.com/julienschmidt/httprouter"
	bolt "go.etcd.io/bbolt"

	"slipway/server/auth"
	"slipway/server/httpx"
	"slipway/storage"
)

// createListener: POST /v2/listeners → 201; (workspace, compute_id) is unique.
func (s *Service) createListener(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	body, err := readBody(r)
	if err != nil {
		return err
	}
	req, err := DecodeListenerCreate(body)
	if err != nil {
		return err
	}
	now := s.now()
	id := storage.NewID()
	l := Listener{ID: id.String(), TenantID: p.WorkspaceID.String(), Version: req.Version, ComputeType: req.ComputeType,
		ComputeID: req.ComputeID, ComputeConfig: req.ComputeConfig, CreatedAt: now, UpdatedAt: now}
	if l.ComputeConfig.K8sNamespaces == nil {
		l.ComputeConfig.K8sNamespaces = []string{}
	}
	err = s.update(func(tx *bolt.Tx) error { return insertListener(tx, p.WorkspaceID, &l) })
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusCreated, l)
	return nil
}

// listListeners: GET /v2/listeners → {resources, offset}.
func (s *Service) listListeners(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	limit, offset, err := httpx.LimitOffset(r.URL.Query(), 20, 100)
	if err != nil {
		return err
	}
	var out List[Listener]
	err = s.DB.View(func(tx *bolt.Tx) (err error) {
		out.Resources, err = workspaceListeners(tx, p.WorkspaceID, limit, offset)
		return err
	})
	if err != nil {
		return err
	}
	out.Offset = offset + len(out.Resources)
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// getListener: GET /v2/listeners/{id}.
func (s *Service) getListener(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p := auth.From(r)
	id, err := httpx.ParseID(ps.ByName("id"), "path", "listener_id")
	if err != nil {
		return err
	}
	var l *Listener
	if err := s.DB.View(func(tx *bolt.Tx) error {
		l, err = loadListener(tx, p.WorkspaceID, id)
		return err
	}); err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, l)
	return nil
}

// patchListener: PATCH /v2/listeners/{id}; compute_type and compute_id are immutable.
func (s *Service) patchListener(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p := auth.From(r)
	id, err := httpx.ParseID(ps.ByName("id"), "path", "listener_id")
	if err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	var l *Listener
	err = s.update(func(tx *bolt.Tx) error {
		l, err = loadListener(tx, p.WorkspaceID, id)
		if err != nil {
			return err
		}
		req, err := DecodeListenerPatch(body, l)
		if err != nil {
			return err
		}
		if req.Version != nil {
			l.Version = req.Version
		}
		if req.ComputeConfig != nil {
			l.ComputeConfig = *req.ComputeConfig
			if l.ComputeConfig.K8sNamespaces == nil {
				l.ComputeConfig.K8sNamespaces = []string{}
			}
		}
		l.UpdatedAt = s.now()
		return putListener(tx, l)
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, l)
	return nil
}

// deleteListener: DELETE /v2/listeners/{id} → 204. A listener that
// deployments still name is refused: they could not be reconciled.
func (s *Service) deleteListener(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p := auth.From(r)
	id, err := httpx.ParseID(ps.ByName("id"), "path", "listener_id")
	if err != nil {
		return err
	}
	err = s.update(func(tx *bolt.Tx) error {
		l, err := loadListener(tx, p.WorkspaceID, id)
		if err != nil {
			return err
		}
		dep, err := deploymentUsingListener(tx, p.WorkspaceID, l.ID)
		if err != nil {
			return err
		}
		if dep != "" {
			return httpx.BadRequest("Listener ID %s is used by deployment %s; delete or move that deployment first.", id, dep)
		}
		return removeListener(tx, p.WorkspaceID, l)
	})
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
