package controlplane

import (
	"errors"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

const (
	bucketListeners       = "listeners"
	idxWorkspaceListeners = "idx_ws_listeners"     // workspace ‖ listener → nil
	idxListenerCompute    = "idx_listener_compute" // workspace ‖ compute id → listener
)

// listenerExists says whether workspace ws has listener id.
func listenerExists(tx *bolt.Tx, ws, id uuid.UUID) bool {
	return tx.Bucket([]byte(idxWorkspaceListeners)).Get(storage.Key(ws, id)) != nil
}

// loadListener returns the listener if it belongs to the workspace.
func loadListener(tx *bolt.Tx, ws, id uuid.UUID) (*Listener, error) {
	if !listenerExists(tx, ws, id) {
		return nil, listenerNotFound(id)
	}
	var l Listener
	if err := storage.Get(tx, bucketListeners, storage.Key(id), &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// insertListener stores a new listener of ws with its indexes; a compute_id
// another listener of ws holds is an errs.Conflict.
func insertListener(tx *bolt.Tx, ws uuid.UUID, l *Listener) error {
	id := uuid.MustParse(l.ID)
	ck := storage.Key(ws, l.ComputeID)
	if tx.Bucket([]byte(idxListenerCompute)).Get(ck) != nil {
		return conflict("A listener with compute_id %q already exists in this workspace.", l.ComputeID)
	}
	return errors.Join(
		putListener(tx, l),
		tx.Bucket([]byte(idxWorkspaceListeners)).Put(storage.Key(ws, id), nil),
		tx.Bucket([]byte(idxListenerCompute)).Put(ck, storage.Key(id)),
	)
}

// putListener writes an existing listener (its indexed fields never change).
func putListener(tx *bolt.Tx, l *Listener) error {
	return storage.Put(tx, bucketListeners, storage.Key(uuid.MustParse(l.ID)), l)
}

// workspaceListeners returns up to limit listeners of ws after offset, oldest first.
func workspaceListeners(tx *bolt.Tx, ws uuid.UUID, limit, offset int) ([]Listener, error) {
	out := []Listener{}
	ids := storage.PrefixIDs(tx, idxWorkspaceListeners, storage.Key(ws), false)
	for i := offset; i < len(ids) && len(out) < limit; i++ {
		var l Listener
		if err := storage.Get(tx, bucketListeners, storage.Key(ids[i]), &l); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// removeListener removes listener l of ws and its indexes.
func removeListener(tx *bolt.Tx, ws uuid.UUID, l *Listener) error {
	id := uuid.MustParse(l.ID)
	return errors.Join(
		storage.Delete(tx, bucketListeners, storage.Key(id)),
		tx.Bucket([]byte(idxWorkspaceListeners)).Delete(storage.Key(ws, id)),
		tx.Bucket([]byte(idxListenerCompute)).Delete(storage.Key(ws, l.ComputeID)),
	)
}
