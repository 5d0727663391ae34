package controlplane

import (
	"errors"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

const (
	bucketRevisions        = "revisions"
	idxDeploymentRevisions = "idx_deployment_revisions" // deployment ‖ revision → nil
)

// putRevision writes a revision and its deployment index entry.
func putRevision(tx *bolt.Tx, rev *revisionRecord) error {
	id, dep := uuid.MustParse(rev.ID), uuid.MustParse(rev.DeploymentID)
	return errors.Join(
		storage.Put(tx, bucketRevisions, storage.Key(id), rev),
		tx.Bucket([]byte(idxDeploymentRevisions)).Put(storage.Key(dep, id), nil),
	)
}

// getRevision returns revision id, whatever its deployment.
func getRevision(tx *bolt.Tx, id uuid.UUID) (*revisionRecord, error) {
	var rev revisionRecord
	if err := storage.Get(tx, bucketRevisions, storage.Key(id), &rev); err != nil {
		return nil, err
	}
	return &rev, nil
}

// revisionOf returns revision rid if it belongs to deployment dep.
func revisionOf(tx *bolt.Tx, dep, rid uuid.UUID) (*revisionRecord, error) {
	if tx.Bucket([]byte(idxDeploymentRevisions)).Get(storage.Key(dep, rid)) == nil {
		return nil, revisionNotFound(rid)
	}
	return getRevision(tx, rid)
}

// eachRevisionOf calls fn with the revisions of deployment dep, newest
// first when newest is set, until fn returns false.
func eachRevisionOf(tx *bolt.Tx, dep uuid.UUID, newest bool, fn func(*revisionRecord) bool) error {
	for _, id := range storage.PrefixIDs(tx, idxDeploymentRevisions, storage.Key(dep), newest) {
		rev, err := getRevision(tx, id)
		if err != nil {
			return err
		}
		if !fn(rev) {
			return nil
		}
	}
	return nil
}

// eachRevision calls fn with every revision of the install.
func eachRevision(tx *bolt.Tx, fn func(*revisionRecord) error) error {
	return eachRecord(tx, bucketRevisions, fn)
}

// deleteRevisions removes every revision of deployment dep, with its logs.
func deleteRevisions(tx *bolt.Tx, dep uuid.UUID) error {
	for _, rid := range storage.PrefixIDs(tx, idxDeploymentRevisions, storage.Key(dep), false) {
		if err := deleteRevision(tx, dep, rid); err != nil {
			return err
		}
	}
	return nil
}

// deleteRevision removes revision rid of deployment dep, with its logs and
// its index entry.
func deleteRevision(tx *bolt.Tx, dep, rid uuid.UUID) error {
	if err := deleteRevisionLogs(tx, rid); err != nil {
		return err
	}
	return errors.Join(storage.Delete(tx, bucketRevisions, storage.Key(rid)),
		tx.Bucket([]byte(idxDeploymentRevisions)).Delete(storage.Key(dep, rid)))
}
