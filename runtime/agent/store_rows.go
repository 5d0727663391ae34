package agent

import (
	"encoding/json"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
)

func putJSON(b *bolt.Bucket, key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	// Keys are mostly time-ordered (UUIDv7 ids, checkpoint sequences), so
	// inserts land at the end: fill pages instead of splitting them in half.
	b.FillPercent = 0.9
	return b.Put([]byte(key), raw)
}

func getJSON(b interface{ Get([]byte) []byte }, key string, v any) error {
	raw := b.Get([]byte(key))
	if raw == nil {
		return ErrNotFound
	}
	return unmarshalStored(raw, v)
}

func idxKey(thread, run string) []byte {
	t, r := uuid.MustParse(thread), uuid.MustParse(run)
	return append(t[:], r[:]...)
}
