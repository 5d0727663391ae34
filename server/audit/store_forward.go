package audit

import (
	"errors"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

// getForwardState reads the forwarder's state for org: the zero state
// when nothing has been forwarded yet.
func getForwardState(tx *bolt.Tx, org uuid.UUID) (ForwardState, error) {
	var st ForwardState
	err := storage.Get(tx, bucketForward, org[:], &st)
	if errors.Is(err, storage.ErrNotFound) {
		return st, nil
	}
	return st, err
}

func putForwardState(tx *bolt.Tx, org uuid.UUID, st *ForwardState) error {
	return storage.Put(tx, bucketForward, storage.Key(org), st)
}
