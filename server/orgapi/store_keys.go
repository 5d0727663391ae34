package orgapi

import (
	"errors"
	"fmt"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/server/auth"
	"slipway/storage"
)

const (
	bucketAPIKeys = "api_keys"
	idxAPIKeyHash = "idx_api_key_hash" // hash of the key → key id
)

// putKey writes a key with its hash index entry.
func putKey(tx *bolt.Tx, k *APIKey) error {
	if err := storage.Put(tx, bucketAPIKeys, storage.Key(k.ID), k); err != nil {
		return err
	}
	return tx.Bucket([]byte(idxAPIKeyHash)).Put(k.Hash, storage.Key(k.ID))
}

// deleteKey deletes a key and its hash index entry, and a service key's
// service identity with it: that user exists only to name the key in the
// audit trail and among the members, and no other key shares it, so
// keeping it would leave a member nobody can act as (and grow the
// organization's member list with every key ever revoked).
func deleteKey(tx *bolt.Tx, k *APIKey) error {
	err := errors.Join(
		tx.Bucket([]byte(idxAPIKeyHash)).Delete(k.Hash),
		storage.Delete(tx, bucketAPIKeys, storage.Key(k.ID)),
	)
	if k.Kind == auth.KindServiceKey && k.UserID != uuid.Nil {
		err = errors.Join(err, deleteUserRecord(tx, k.OrgID, k.UserID))
	}
	return err
}

// getKey reads a key; a missing one is storage.ErrNotFound.
func getKey(tx *bolt.Tx, id uuid.UUID) (*APIKey, error) {
	var k APIKey
	if err := storage.Get(tx, bucketAPIKeys, storage.Key(id), &k); err != nil {
		return nil, err
	}
	return &k, nil
}

// keyByHash finds the key whose hash is hash; nil when there is none.
func keyByHash(tx *bolt.Tx, hash []byte) (*APIKey, error) {
	idRaw := tx.Bucket([]byte(idxAPIKeyHash)).Get(hash)
	if idRaw == nil {
		return nil, nil
	}
	var k APIKey
	if err := storage.Get(tx, bucketAPIKeys, idRaw, &k); err != nil {
		return nil, fmt.Errorf("api key record: %w", err)
	}
	return &k, nil
}

// keysWhere returns the keys for which keep is true, in id order.
func keysWhere(tx *bolt.Tx, keep func(*APIKey) bool) ([]APIKey, error) {
	var out []APIKey
	err := tx.Bucket([]byte(bucketAPIKeys)).ForEach(func(_, v []byte) error {
		var k APIKey
		if err := jsonUnmarshal(v, &k); err != nil {
			return fmt.Errorf("api key: %w", err)
		}
		if keep(&k) {
			out = append(out, k)
		}
		return nil
	})
	return out, err
}

// deleteKeysWhere deletes the keys for which doomed is true.
func deleteKeysWhere(tx *bolt.Tx, doomed func(*APIKey) bool) error {
	keys, err := keysWhere(tx, doomed)
	if err != nil {
		return err
	}
	for i := range keys {
		if err := deleteKey(tx, &keys[i]); err != nil {
			return err
		}
	}
	return nil
}
