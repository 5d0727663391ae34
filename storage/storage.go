// Package storage is the thin layer over bbolt shared by the control-plane
// database and the agent database: opening with a lock timeout, the schema
// version in the meta bucket, ordered migrations, and key helpers.
package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
	bolterr "go.etcd.io/bbolt/errors"
)

// ErrInUse is returned when another process holds the database lock.
var ErrInUse = errors.New("data directory is in use by another process")

// Migration moves a database from version Version-1 to Version.
type Migration struct {
	Version int
	Name    string
	Apply   func(tx *bolt.Tx) error
	// Keyed is set instead of Apply by a migration that signs what it
	// writes; keys is nil when the database was opened without them.
	Keyed func(tx *bolt.Tx, keys Keys) error
}

// Keys derives a sub-key of the master key for a purpose (Sealer.Key).
type Keys func(purpose string) []byte

var (
	metaBucket = []byte("meta")
	versionKey = []byte("version")
)

// Open opens (creating if needed) the bbolt file at path, waits at most
// lockTimeout for the file lock, and applies every migration newer than the
// stored version, each in its own transaction.
func Open(path string, lockTimeout time.Duration, migrations []Migration) (*bolt.DB, error) {
	return OpenKeyed(path, lockTimeout, migrations, nil)
}

// OpenKeyed is Open for a database whose migrations may need sub-keys of
// the master key (the control plane's, to seal audit chains).
func OpenKeyed(path string, lockTimeout time.Duration, migrations []Migration, keys Keys) (*bolt.DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:         lockTimeout,
		InitialMmapSize: 64 << 20,
		FreelistType:    bolt.FreelistMapType,
	})
	if errors.Is(err, bolterr.ErrTimeout) {
		return nil, fmt.Errorf("data directory %s: %w", filepath.Dir(path), ErrInUse)
	}
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if err := Migrate(db, migrations, keys); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// Version reads the schema version (0 for a new database).
func Version(tx *bolt.Tx) int {
	b := tx.Bucket(metaBucket)
	if b == nil {
		return 0
	}
	v := b.Get(versionKey)
	if len(v) != 8 {
		return 0
	}
	return int(binary.BigEndian.Uint64(v))
}

// Migrate applies the migrations above the stored version in order; keys
// (which may be nil) is passed to the keyed ones.
func Migrate(db *bolt.DB, migrations []Migration, keys Keys) error {
	// A database a newer binary migrated may hold rows this one cannot
	// read (packed checkpoint rows, migration 10 of the agent's): a
	// downgrade must not start and write beside them as if they were not
	// there.
	var have int
	_ = db.View(func(tx *bolt.Tx) error { have = Version(tx); return nil })
	if len(migrations) > 0 && have > len(migrations) {
		return fmt.Errorf("%w: schema %d, this binary knows up to %d; run the Slipway version that wrote it", ErrSchemaNewer, have, len(migrations))
	}
	for i, m := range migrations {
		if m.Version != i+1 {
			return fmt.Errorf("migration %q has version %d, want %d", m.Name, m.Version, i+1)
		}
		err := db.Update(func(tx *bolt.Tx) error {
			if Version(tx) >= m.Version {
				return nil
			}
			apply := m.Apply
			if m.Keyed != nil {
				apply = func(tx *bolt.Tx) error { return m.Keyed(tx, keys) }
			}
			if err := apply(tx); err != nil {
				return err
			}
			b, err := tx.CreateBucketIfNotExists(metaBucket)
			if err != nil {
				return err
			}
			return b.Put(versionKey, U64(uint64(m.Version)))
		})
		if err != nil {
			return fmt.Errorf("migration %d (%s): %w", m.Version, m.Name, err)
		}
	}
	return nil
}

// ErrSchemaNewer refuses a database written by a newer Slipway.
var ErrSchemaNewer = errors.New("the database was written by a newer Slipway")

// U64 encodes n big-endian so byte order equals numeric order.
func U64(n uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	return b[:]
}

// NewID returns a UUIDv7: time-ordered, so keys sort by creation time.
func NewID() uuid.UUID {
	id, err := uuid.NewV7()
	if err != nil {
		// Only fails when the system random source fails.
		panic(fmt.Errorf("uuid: %w", err))
	}
	return id
}

// CreateBuckets creates each named top-level bucket.
func CreateBuckets(tx *bolt.Tx, names ...string) error {
	for _, n := range names {
		if _, err := tx.CreateBucketIfNotExists([]byte(n)); err != nil {
			return fmt.Errorf("create bucket %s: %w", n, err)
		}
	}
	return nil
}

// Copy returns a copy of b; bbolt's slices die with their transaction.
func Copy(b []byte) []byte {
	if b == nil {
		return nil
	}
	c := make([]byte, len(b))
	copy(c, b)
	return c
}

// U64ToInt decodes a key part written by U64.
func U64ToInt(b []byte) uint64 {
	if len(b) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b[:8])
}
