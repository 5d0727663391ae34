package orgapi

import (
	"errors"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

const (
	bucketPendingMembers = "pending_members"
	idxOrgPending        = "idx_org_pending" // org id ‖ invitation id → nil
)

// orgPending reads the open invitations of org in id order.
func orgPending(tx *bolt.Tx, org uuid.UUID) ([]PendingMember, error) {
	return readIndexed[PendingMember](tx, idxOrgPending, bucketPendingMembers, org, "invitation")
}

// getPending reads an invitation; a missing one is storage.ErrNotFound.
func getPending(tx *bolt.Tx, id uuid.UUID) (*PendingMember, error) {
	var pm PendingMember
	if err := storage.Get(tx, bucketPendingMembers, storage.Key(id), &pm); err != nil {
		return nil, err
	}
	return &pm, nil
}

func putPending(tx *bolt.Tx, pm *PendingMember) error {
	return errors.Join(storage.Put(tx, bucketPendingMembers, storage.Key(pm.ID), pm),
		tx.Bucket([]byte(idxOrgPending)).Put(storage.Key(pm.OrgID, pm.ID), nil))
}

func deletePending(tx *bolt.Tx, pm *PendingMember) error {
	return errors.Join(storage.Delete(tx, bucketPendingMembers, storage.Key(pm.ID)),
		tx.Bucket([]byte(idxOrgPending)).Delete(storage.Key(pm.OrgID, pm.ID)))
}
