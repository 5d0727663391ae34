package controlplane

import (
	"encoding/json"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

const bucketUploads = "uploads" // upload → Upload

// putUpload writes an upload's record.
func putUpload(tx *bolt.Tx, u *Upload) error {
	return storage.Put(tx, bucketUploads, storage.Key(u.ID), u)
}

// getUpload returns upload id (storage.ErrNotFound when there is none).
func getUpload(tx *bolt.Tx, id uuid.UUID) (*Upload, error) {
	var u Upload
	if err := storage.Get(tx, bucketUploads, storage.Key(id), &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// deleteUploads removes the upload records of deployment dep.
func deleteUploads(tx *bolt.Tx, dep uuid.UUID) error {
	var doomed [][]byte
	err := tx.Bucket([]byte(bucketUploads)).ForEach(func(k, v []byte) error {
		var u Upload
		if json.Unmarshal(v, &u) == nil && u.DeploymentID == dep {
			doomed = append(doomed, storage.Copy(k))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range doomed {
		if err := storage.Delete(tx, bucketUploads, k); err != nil {
			return err
		}
	}
	return nil
}
