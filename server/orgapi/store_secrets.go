package orgapi

import (
	"strings"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

// bucketWorkspaceSecrets maps workspace id ‖ secret key to the value
// sealed under the master key; the store never sees a value in clear.
const bucketWorkspaceSecrets = "workspace_secrets"

// workspaceSecretKeys lists the keys of a workspace's secrets in order.
func workspaceSecretKeys(tx *bolt.Tx, ws uuid.UUID) []string {
	var out []string
	prefix := storage.Key(ws)
	c := tx.Bucket([]byte(bucketWorkspaceSecrets)).Cursor()
	for k, _ := c.Seek(prefix); k != nil && strings.HasPrefix(string(k), string(prefix)); k, _ = c.Next() {
		out = append(out, string(k[len(prefix):]))
	}
	return out
}

func putWorkspaceSecret(tx *bolt.Tx, ws uuid.UUID, key, sealed string) error {
	return tx.Bucket([]byte(bucketWorkspaceSecrets)).Put(storage.Key(ws, key), []byte(sealed))
}

func deleteWorkspaceSecret(tx *bolt.Tx, ws uuid.UUID, key string) error {
	return tx.Bucket([]byte(bucketWorkspaceSecrets)).Delete(storage.Key(ws, key))
}
