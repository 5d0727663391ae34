package controlplane

import (
	"errors"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestDeploymentGenerationPerDatabase: a committed deployment write moves
// its own database's generation only (control planes sharing a process do
// not invalidate each other's target caches), and a rolled-back one moves
// none.
func TestDeploymentGenerationPerDatabase(t *testing.T) {
	open := func() *bolt.DB {
		db, err := bolt.Open(filepath.Join(t.TempDir(), "x.db"), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	a, b := open(), open()
	a0, b0 := deploymentsGen(a).Load(), deploymentsGen(b).Load()
	if err := a.Update(func(tx *bolt.Tx) error { deploymentsChanged(tx); return nil }); err != nil {
		t.Fatal(err)
	}
	rollback := errors.New("roll back")
	if err := b.Update(func(tx *bolt.Tx) error { deploymentsChanged(tx); return rollback }); !errors.Is(err, rollback) {
		t.Fatal(err)
	}
	if got := deploymentsGen(a).Load(); got != a0+1 {
		t.Errorf("committed write: generation %d, want %d", got, a0+1)
	}
	if got := deploymentsGen(b).Load(); got != b0 {
		t.Errorf("other database after a rolled-back write: generation %d, want %d", got, b0)
	}
}
