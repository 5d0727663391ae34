package orgapi

import (
	"errors"
	"fmt"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

const bucketSessions = "sessions" // hash of the token → Session

// getSession reads the session whose token hashes to hash.
func getSession(tx *bolt.Tx, hash []byte) (*Session, error) {
	var sess Session
	if err := storage.Get(tx, bucketSessions, hash, &sess); err != nil {
		return nil, err
	}
	return &sess, nil
}

func putSession(tx *bolt.Tx, hash []byte, sess *Session) error {
	return storage.Put(tx, bucketSessions, hash, sess)
}

func deleteSession(tx *bolt.Tx, hash []byte) error {
	return storage.Delete(tx, bucketSessions, hash)
}

// dropSessions ends a user's login sessions (password changed, removed).
func dropSessions(tx *bolt.Tx, user uuid.UUID) error {
	b := tx.Bucket([]byte(bucketSessions))
	var doomed [][]byte
	err := b.ForEach(func(k, v []byte) error {
		var sess Session
		if err := jsonUnmarshal(v, &sess); err != nil {
			return fmt.Errorf("session: %w", err)
		}
		if sess.UserID == user {
			doomed = append(doomed, storage.Copy(k))
		}
		return nil
	})
	for _, k := range doomed {
		err = errors.Join(err, b.Delete(k))
	}
	return err
}
