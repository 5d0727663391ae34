package orgapi

import (
	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

const (
	bucketWorkspaces = "workspaces"
	idxOrgWorkspaces = "idx_org_workspaces" // org id ‖ workspace id → nil
)

// getWorkspace reads a workspace; a missing one is storage.ErrNotFound.
func getWorkspace(tx *bolt.Tx, id uuid.UUID) (*Workspace, error) {
	var ws Workspace
	if err := storage.Get(tx, bucketWorkspaces, storage.Key(id), &ws); err != nil {
		return nil, err
	}
	return &ws, nil
}

func workspaceExists(tx *bolt.Tx, id uuid.UUID) bool {
	return tx.Bucket([]byte(bucketWorkspaces)).Get(storage.Key(id)) != nil
}

// putWorkspace writes a workspace with its organization index entry.
func putWorkspace(tx *bolt.Tx, ws *Workspace) error {
	if err := storage.Put(tx, bucketWorkspaces, storage.Key(ws.ID), ws); err != nil {
		return err
	}
	return tx.Bucket([]byte(idxOrgWorkspaces)).Put(storage.Key(ws.OrgID, ws.ID), nil)
}

// removeWorkspace deletes a workspace and its index entry.
func removeWorkspace(tx *bolt.Tx, ws *Workspace) error {
	if err := tx.Bucket([]byte(idxOrgWorkspaces)).Delete(storage.Key(ws.OrgID, ws.ID)); err != nil {
		return err
	}
	return storage.Delete(tx, bucketWorkspaces, storage.Key(ws.ID))
}

func workspaceInOrg(tx *bolt.Tx, org, ws uuid.UUID) bool {
	return tx.Bucket([]byte(idxOrgWorkspaces)).Get(storage.Key(org, ws)) != nil
}

// orgWorkspaceIDs lists an organization's workspaces in id order.
func orgWorkspaceIDs(tx *bolt.Tx, org uuid.UUID) []uuid.UUID {
	return storage.PrefixIDs(tx, idxOrgWorkspaces, storage.Key(org), false)
}

// orgWorkspaces reads an organization's workspaces in id order.
func orgWorkspaces(tx *bolt.Tx, org uuid.UUID) ([]Workspace, error) {
	var out []Workspace
	for _, id := range orgWorkspaceIDs(tx, org) {
		ws, err := getWorkspace(tx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, *ws)
	}
	return out, nil
}
