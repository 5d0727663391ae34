package controlplane

import (
	"bytes"
	"errors"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

// idxCustomHost maps storage.HostKey(custom_url) to the one deployment the
// host routes to, across the whole install.
const idxCustomHost = "idx_custom_host"

// claimHost gives host to deployment id, or answers an errs.Conflict when
// another deployment holds it. The detail names the host only: the holder
// may be another organization's.
func claimHost(tx *bolt.Tx, host string, id uuid.UUID) error {
	if host == "" {
		return nil
	}
	idx := tx.Bucket([]byte(idxCustomHost))
	if cur := idx.Get([]byte(host)); cur != nil && !bytes.Equal(cur, id[:]) {
		return conflict("custom_url: the host %q is already used by another deployment; each host can route to one deployment only.", host)
	}
	return idx.Put([]byte(host), storage.Key(id))
}

// releaseHost frees host if deployment id holds it.
func releaseHost(tx *bolt.Tx, host string, id uuid.UUID) error {
	if host == "" {
		return nil
	}
	idx := tx.Bucket([]byte(idxCustomHost))
	if cur := idx.Get([]byte(host)); cur != nil && bytes.Equal(cur, id[:]) {
		return idx.Delete([]byte(host))
	}
	return nil
}

// moveHost moves deployment id's claim from oldHost to newHost.
func moveHost(tx *bolt.Tx, oldHost, newHost string, id uuid.UUID) error {
	if newHost == oldHost {
		return nil
	}
	return errors.Join(claimHost(tx, newHost, id), releaseHost(tx, oldHost, id))
}

// deploymentByHostKey returns the deployment host (a storage.HostKey)
// routes to, or nil.
func deploymentByHostKey(tx *bolt.Tx, host string) (*deploymentRecord, error) {
	raw := tx.Bucket([]byte(idxCustomHost)).Get([]byte(host))
	if len(raw) != 16 {
		return nil, nil
	}
	return readDeployment(tx, uuid.UUID(raw))
}
