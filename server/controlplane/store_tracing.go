package controlplane

import (
	"errors"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

const (
	bucketTracingProjects = "tracing_projects"
	idxTracingProjectName = "idx_tracing_project_name" // workspace ‖ name → project
)

// ensureTracingProject creates the project named after the deployment, or
// adopts an existing project of that name (one kept from an earlier
// deployment deleted without delete_tracing_project).
func ensureTracingProject(tx *bolt.Tx, ws, dep uuid.UUID, name string, now time.Time) error {
	idx := tx.Bucket([]byte(idxTracingProjectName))
	key := storage.Key(ws, name)
	if raw := idx.Get(key); raw != nil {
		var tp TracingProject
		if err := storage.Get(tx, bucketTracingProjects, raw, &tp); err != nil {
			return err
		}
		tp.DeploymentID = dep.String()
		return storage.Put(tx, bucketTracingProjects, raw, &tp)
	}
	id := storage.NewID()
	tp := TracingProject{ID: id.String(), WorkspaceID: ws.String(), Name: name, DeploymentID: dep.String(), CreatedAt: now}
	return errors.Join(storage.Put(tx, bucketTracingProjects, storage.Key(id), &tp), idx.Put(key, storage.Key(id)))
}

// deleteTracingProject removes the project of ws called name, if any.
func deleteTracingProject(tx *bolt.Tx, ws uuid.UUID, name string) error {
	idx := tx.Bucket([]byte(idxTracingProjectName))
	key := storage.Key(ws, name)
	raw := idx.Get(key)
	if raw == nil {
		return nil
	}
	return errors.Join(storage.Delete(tx, bucketTracingProjects, storage.Copy(raw)), idx.Delete(key))
}

// tracingProjectNamed says whether ws has a tracing project called name.
func tracingProjectNamed(tx *bolt.Tx, ws uuid.UUID, name string) bool {
	return tx.Bucket([]byte(idxTracingProjectName)).Get(storage.Key(ws, name)) != nil
}

// tracingProject loads a project of workspace ws by id.
func tracingProject(tx *bolt.Tx, ws uuid.UUID, id uuid.UUID) (*TracingProject, error) {
	var tp TracingProject
	if storage.Get(tx, bucketTracingProjects, storage.Key(id), &tp) != nil || tp.WorkspaceID != ws.String() {
		return nil, tracingNotFound(id)
	}
	return &tp, nil
}

// putTracingProject writes a project; renaming one goes through
// renameTracingProject, which keeps the name index right.
func putTracingProject(tx *bolt.Tx, tp *TracingProject) error {
	return storage.Put(tx, bucketTracingProjects, storage.Key(uuid.MustParse(tp.ID)), tp)
}

// renameTracingProject moves tp of ws to name in the name index and in tp
// (written by the caller's putTracingProject); a name another project of
// ws holds is an errs.Conflict.
func renameTracingProject(tx *bolt.Tx, ws uuid.UUID, tp *TracingProject, name string) error {
	idx := tx.Bucket([]byte(idxTracingProjectName))
	if idx.Get(storage.Key(ws, name)) != nil {
		return conflict("A tracing project named %q already exists.", name)
	}
	if err := errors.Join(idx.Delete(storage.Key(ws, tp.Name)),
		idx.Put(storage.Key(ws, name), storage.Key(uuid.MustParse(tp.ID)))); err != nil {
		return err
	}
	tp.Name = name
	return nil
}

// workspaceTracingProjects lists the projects of ws, those called name
// only when name is not "".
func workspaceTracingProjects(tx *bolt.Tx, ws uuid.UUID, name string) ([]TracingProject, error) {
	out := []TracingProject{}
	err := eachRecord(tx, bucketTracingProjects, func(tp *TracingProject) error {
		if tp.WorkspaceID == ws.String() && (name == "" || tp.Name == name) {
			out = append(out, *tp)
		}
		return nil
	})
	return out, err
}
