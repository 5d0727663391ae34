package orgapi

import (
	"fmt"
	"strings"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

// bucketTTLSettings maps org id ‖ (workspace id, or 16 zero bytes for the
// organization) to TTLSettings.
const bucketTTLSettings = "ttl_settings"

func ttlKey(org uuid.UUID, ws *uuid.UUID) []byte {
	if ws == nil {
		return storage.Key(org, uuid.Nil)
	}
	return storage.Key(org, *ws)
}

// getTTL reads the settings of org (ws nil) or of its workspace ws; a
// missing one is storage.ErrNotFound.
func getTTL(tx *bolt.Tx, org uuid.UUID, ws *uuid.UUID) (*TTLSettings, error) {
	var t TTLSettings
	if err := storage.Get(tx, bucketTTLSettings, ttlKey(org, ws), &t); err != nil {
		return nil, err
	}
	return &t, nil
}

func putTTL(tx *bolt.Tx, t *TTLSettings) error {
	return storage.Put(tx, bucketTTLSettings, ttlKey(t.OrgID, t.TenantID), t)
}

// orgTTLs reads the settings of org and of its workspaces, in key order.
func orgTTLs(tx *bolt.Tx, org uuid.UUID) ([]TTLSettings, error) {
	var out []TTLSettings
	prefix := storage.Key(org)
	c := tx.Bucket([]byte(bucketTTLSettings)).Cursor()
	for k, v := c.Seek(prefix); k != nil && strings.HasPrefix(string(k), string(prefix)); k, v = c.Next() {
		var t TTLSettings
		if err := jsonUnmarshal(v, &t); err != nil {
			return nil, fmt.Errorf("ttl settings: %w", err)
		}
		out = append(out, t)
	}
	return out, nil
}
