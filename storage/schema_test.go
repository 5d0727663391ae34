package storage

import (
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestMigrationV2BackfillsPendingIndex opens a version-1 database holding
// deployments and checks that migration 2 marks each one pending.
func TestMigrationV2BackfillsPendingIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, err := Open(path, time.Second, ControlPlaneMigrations[:1])
	if err != nil {
		t.Fatal(err)
	}
	ids := []any{NewID(), NewID()}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, id := range ids {
			if err := tx.Bucket([]byte(BucketDeployments)).Put(Key(id), []byte(`{}`)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	db, err = Open(path, time.Second, ControlPlaneMigrations)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_ = db.View(func(tx *bolt.Tx) error {
		if v := Version(tx); v != len(ControlPlaneMigrations) {
			t.Errorf("version %d", v)
		}
		for _, id := range ids {
			if tx.Bucket([]byte(IdxPendingDeployments)).Get(Key(id)) == nil {
				t.Errorf("deployment %v not pending after migration", id)
			}
		}
		return nil
	})
}
