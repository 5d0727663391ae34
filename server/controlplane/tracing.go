package controlplane

import (
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/julienschmidt/httprouter"
	bolt "go.etcd.io/bbolt"

	"slipway/server/httpx"
	"slipway/storage"
)

// TracingProject is the tracing project created with a deployment, under
// the deployment's name, as the hosted service does.
type TracingProject struct {
	ID           string    `json:"id"`
	WorkspaceID  string    `json:"tenant_id"`
	Name         string    `json:"name"`
	DeploymentID string    `json:"deployment_id"`
	CreatedAt    time.Time `json:"created_at"`
}

// ensureTracingProject creates the project named after the deployment, or
// adopts an existing project of that name (one kept from an earlier
// deployment deleted without delete_tracing_project).
func ensureTracingProject(tx *bolt.Tx, ws, dep uuid.UUID, name string, now time.Time) error {
	idx := tx.Bucket([]byte(storage.IdxTracingProjectName))
	key := storage.Key(ws, name)
	if raw := idx.Get(key); raw != nil {
		var tp TracingProject
		if err := storage.Get(tx, storage.BucketTracingProjects, raw, &tp); err != nil {
			return err
		}
		tp.DeploymentID = dep.String()
		return storage.Put(tx, storage.BucketTracingProjects, raw, &tp)
	}
	id := storage.NewID()
	tp := TracingProject{ID: id.String(), WorkspaceID: ws.String(), Name: name, DeploymentID: dep.String(), CreatedAt: now}
	return errors.Join(storage.Put(tx, storage.BucketTracingProjects, storage.Key(id), &tp), idx.Put(key, storage.Key(id)))
}

// deleteTracingProject removes the project named after a deployment.
func deleteTracingProject(tx *bolt.Tx, ws uuid.UUID, name string) error {
	idx := tx.Bucket([]byte(storage.IdxTracingProjectName))
	key := storage.Key(ws, name)
	raw := idx.Get(key)
	if raw == nil {
		return nil
	}
	return errors.Join(storage.Delete(tx, storage.BucketTracingProjects, storage.Copy(raw)), idx.Delete(key))
}

// TracingProjectExists reports whether ws has a tracing project called name.
func (s *Service) TracingProjectExists(ws uuid.UUID, name string) bool {
	found := false
	_ = s.DB.View(func(tx *bolt.Tx) error {
		found = tx.Bucket([]byte(storage.IdxTracingProjectName)).Get(storage.Key(ws, name)) != nil
		return nil
	})
	return found
}

// tracingRoutes registers the tracing-project (tracer session) endpoints
// that change projects.
func (s *Service) tracingRoutes(rt *httprouter.Router, prefix string, ws func(httpx.Handle) httprouter.Handle) {
}
