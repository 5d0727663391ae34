package controlplane

import (
	"errors"
	"net/http"

	"github.com/google/uuid"
	"github.com/julienschmidt/httprouter"
	bolt "go.etcd.io/bbolt"

	"slipway/server/auth"
	"slipway/server/httpx"
	"slipway/storage"
)

func listenerNotFound(id uuid.UUID) error { return httpx.NotFound("Listener ID %s not found.", id) }

func loadListener(tx *bolt.Tx, ws, id uuid.UUID) (*Listener, error) {
	if tx.Bucket([]byte(storage.IdxWorkspaceListeners)).Get(storage.Key(ws, id)) == nil {
		return nil, listenerNotFound(id)
	}
	var l Listener
	if err := storage.Get(tx, storage.BucketListeners, storage.Key(id), &l); err != nil {
		return nil, err
	}
	return &l, nil
}

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
	err = s.update(func(tx *bolt.Tx) error {
		ck := storage.Key(p.WorkspaceID, req.ComputeID)
		if tx.Bucket([]byte(storage.IdxListenerCompute)).Get(ck) != nil {
			return httpx.Conflict("A listener with compute_id %q already exists in this workspace.", req.ComputeID)
		}
		return errors.Join(
			storage.Put(tx, storage.BucketListeners, storage.Key(id), &l),
			tx.Bucket([]byte(storage.IdxWorkspaceListeners)).Put(storage.Key(p.WorkspaceID, id), nil),
			tx.Bucket([]byte(storage.IdxListenerCompute)).Put(ck, storage.Key(id)),
		)
	})
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
	out := List[Listener]{Resources: []Listener{}}
	err = s.DB.View(func(tx *bolt.Tx) error {
		ids := storage.PrefixIDs(tx, storage.IdxWorkspaceListeners, storage.Key(p.WorkspaceID), false)
		for i := offset; i < len(ids) && len(out.Resources) < limit; i++ {
			var l Listener
			if err := storage.Get(tx, storage.BucketListeners, storage.Key(ids[i]), &l); err != nil {
				return err
			}
			out.Resources = append(out.Resources, l)
		}
		return nil
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
		return storage.Put(tx, storage.BucketListeners, storage.Key(id), l)
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
		for _, did := range storage.PrefixIDs(tx, storage.IdxWorkspaceDeployments, storage.Key(p.WorkspaceID), false) {
			var d deploymentRecord
			if err := storage.Get(tx, storage.BucketDeployments, storage.Key(did), &d); err != nil {
				return err
			}
			if d.SourceConfig.ListenerID != nil && *d.SourceConfig.ListenerID == l.ID {
				return httpx.BadRequest("Listener ID %s is used by deployment %s; delete or move that deployment first.", id, d.ID)
			}
		}
		return errors.Join(
			storage.Delete(tx, storage.BucketListeners, storage.Key(id)),
			tx.Bucket([]byte(storage.IdxWorkspaceListeners)).Delete(storage.Key(p.WorkspaceID, id)),
			tx.Bucket([]byte(storage.IdxListenerCompute)).Delete(storage.Key(p.WorkspaceID, l.ComputeID)),
		)
	})
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
