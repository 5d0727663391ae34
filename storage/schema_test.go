package storage

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
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
			if err := tx.Bucket([]byte("deployments")).Put(Key(id), []byte(`{}`)); err != nil {
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
			if tx.Bucket([]byte("idx_pending_deployments")).Get(Key(id)) == nil {
				t.Errorf("deployment %v not pending after migration", id)
			}
		}
		return nil
	})
}

// TestMigrationV4AddsForwardBucket upgrades a version-3 database holding
// audit data and checks that migration 4 adds the forwarder's bucket and
// leaves the audit buckets alone.
func TestMigrationV4AddsForwardBucket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, err := Open(path, time.Second, ControlPlaneMigrations[:3])
	if err != nil {
		t.Fatal(err)
	}
	org := NewID()
	if err := db.Update(func(tx *bolt.Tx) error {
		if tx.Bucket([]byte("audit_forward")) != nil {
			t.Error("forward bucket exists before migration 4")
		}
		return tx.Bucket([]byte("audit_events")).Put(Key(org, U64(1)), []byte(`{"seq":1}`))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	db, err = Open(path, time.Second, ControlPlaneMigrations)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_ = db.View(func(tx *bolt.Tx) error {
		if v := Version(tx); v < 4 {
			t.Errorf("version %d", v)
		}
		if tx.Bucket([]byte("audit_forward")) == nil {
			t.Error("no audit_forward bucket after migration 4")
		}
		if string(tx.Bucket([]byte("audit_events")).Get(Key(org, U64(1)))) != `{"seq":1}` {
			t.Error("migration 4 touched the audit events")
		}
		return nil
	})
}

// TestMigrationV5IndexesExistingMembers upgrades a version-4 database
// holding users of two organizations and checks that migration 5 lists
// each user under its own organization only.
func TestMigrationV5IndexesExistingMembers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, err := Open(path, time.Second, ControlPlaneMigrations[:4])
	if err != nil {
		t.Fatal(err)
	}
	orgA, orgB := NewID(), NewID()
	users := map[uuid.UUID]uuid.UUID{NewID(): orgA, NewID(): orgA, NewID(): orgB}
	err = db.Update(func(tx *bolt.Tx) error {
		for u, org := range users {
			if err := tx.Bucket([]byte("users")).Put(Key(u), []byte(`{"organization_id":"`+org.String()+`"}`)); err != nil {
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
		for _, org := range []uuid.UUID{orgA, orgB} {
			got := PrefixIDs(tx, "idx_org_users", Key(org), false)
			want := 0
			for u, o := range users {
				if o == org {
					want++
					found := false
					for _, g := range got {
						found = found || g == u
					}
					if !found {
						t.Errorf("user %s not indexed under organization %s", u, org)
					}
				}
			}
			if len(got) != want {
				t.Errorf("organization %s: %d members indexed, want %d", org, len(got), want)
			}
		}
		return nil
	})
}

// TestMigrationV7IndexesCustomHosts upgrades a version-6 database where
// deployments of two organizations claim one host under different
// spellings: the oldest claim keeps the host, deployments being deleted or
// without a custom_url claim nothing, and other hosts are indexed.
func TestMigrationV7IndexesCustomHosts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, err := Open(path, time.Second, ControlPlaneMigrations[:6])
	if err != nil {
		t.Fatal(err)
	}
	deleting, oldest, newer, other, none := NewID(), NewID(), NewID(), NewID(), NewID()
	records := []struct {
		id  uuid.UUID
		rec string
	}{
		{deleting, `{"status":"AWAITING_DELETE","source_config":{"custom_url":"https://agent-a.example.com"}}`},
		{oldest, `{"status":"READY","source_config":{"custom_url":"https://agent-a.example.com"}}`},
		{newer, `{"status":"READY","source_config":{"custom_url":"https://AGENT-A.example.com.:443"}}`},
		{other, `{"status":"UNUSED","source_config":{"custom_url":"b.example.com"}}`},
		{none, `{"status":"READY","source_config":{"custom_url":null}}`},
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, r := range records {
			if err := tx.Bucket([]byte("deployments")).Put(Key(r.id), []byte(r.rec)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = Open(path, time.Second, ControlPlaneMigrations)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_ = db.View(func(tx *bolt.Tx) error {
		idx := tx.Bucket([]byte("idx_custom_host"))
		if got := idx.Get([]byte("agent-a.example.com")); string(got) != string(Key(oldest)) {
			t.Errorf("agent-a.example.com → %x, want the oldest live claim %x", got, Key(oldest))
		}
		if got := idx.Get([]byte("b.example.com")); string(got) != string(Key(other)) {
			t.Errorf("b.example.com → %x, want %x", got, Key(other))
		}
		if n := idx.Stats().KeyN; n != 2 {
			t.Errorf("%d hosts indexed, want 2", n)
		}
		return nil
	})
}

// TestInstanceID checks that migration 8 gives a new database and an
// upgraded one an instance id, that it survives reopening and a move of
// the file, and that two databases get different ones.
func TestInstanceID(t *testing.T) {
	dir := t.TempDir()
	open := func(path string, migrations []Migration) string {
		t.Helper()
		db, err := Open(path, time.Second, migrations)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		id, err := InstanceID(db)
		if err != nil {
			return ""
		}
		return id
	}
	fresh := filepath.Join(dir, "fresh")
	a := open(fresh, ControlPlaneMigrations)
	if len(a) != 32 {
		t.Fatalf("instance id %q, want 32 hex characters", a)
	}
	if again := open(fresh, ControlPlaneMigrations); again != a {
		t.Fatalf("instance id changed on reopen: %s then %s", a, again)
	}
	moved := filepath.Join(dir, "moved")
	if err := os.Rename(fresh, moved); err != nil {
		t.Fatal(err)
	}
	if m := open(moved, ControlPlaneMigrations); m != a {
		t.Fatalf("instance id changed with the move: %s then %s", a, m)
	}
	old := filepath.Join(dir, "old")
	if id := open(old, ControlPlaneMigrations[:7]); id != "" {
		t.Fatalf("a v7 database has an instance id %q", id)
	}
	b := open(old, ControlPlaneMigrations)
	if len(b) != 32 || b == a {
		t.Fatalf("upgraded database: instance id %q (other %q)", b, a)
	}
}

// TestMigrationV10RemovesOrphanServiceUsers upgrades a version-9 database
// in which revoked workspace keys left their service identities behind:
// those go, with their member index entries; a service user whose key
// still exists stays, and so do people.
func TestMigrationV10RemovesOrphanServiceUsers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, err := Open(path, time.Second, ControlPlaneMigrations[:9])
	if err != nil {
		t.Fatal(err)
	}
	org := NewID()
	person, kept, orphanA, orphanB := NewID(), NewID(), NewID(), NewID()
	user := func(id uuid.UUID, service bool) []byte {
		s := "false"
		if service {
			s = "true"
		}
		return []byte(`{"id":"` + id.String() + `","organization_id":"` + org.String() + `","service":` + s + `}`)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for id, service := range map[uuid.UUID]bool{person: false, kept: true, orphanA: true, orphanB: true} {
			if err := tx.Bucket([]byte("users")).Put(Key(id), user(id, service)); err != nil {
				return err
			}
			if err := tx.Bucket([]byte("idx_org_users")).Put(Key(org, id), nil); err != nil {
				return err
			}
		}
		key := NewID()
		return tx.Bucket([]byte("api_keys")).Put(Key(key), []byte(`{"id":"`+key.String()+`","user_id":"`+kept.String()+`"}`))
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
		for id, want := range map[uuid.UUID]bool{person: true, kept: true, orphanA: false, orphanB: false} {
			got := tx.Bucket([]byte("users")).Get(Key(id)) != nil
			member := tx.Bucket([]byte("idx_org_users")).Get(Key(org, id)) != nil
			if got != want || member != want {
				t.Errorf("user %s: stored %v, member %v; want %v", id, got, member, want)
			}
		}
		return nil
	})
}

// TestMigrationV11NamesDeploymentsInTheWorkspaceIndex upgrades a
// version-10 database: each workspace index entry gets its deployment's
// name, which name_contains reads instead of the record, and the name's
// trigrams.
func TestMigrationV11NamesDeploymentsInTheWorkspaceIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, err := Open(path, time.Second, ControlPlaneMigrations[:10])
	if err != nil {
		t.Fatal(err)
	}
	ws := NewID()
	names := map[uuid.UUID]string{NewID(): "alpha", NewID(): "beta-2"}
	err = db.Update(func(tx *bolt.Tx) error {
		for id, name := range names {
			if err := tx.Bucket([]byte("deployments")).Put(Key(id), []byte(`{"id":"`+id.String()+`","name":"`+name+`"}`)); err != nil {
				return err
			}
			if err := tx.Bucket([]byte("idx_ws_deployments")).Put(Key(ws, id), nil); err != nil {
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
		for id, name := range names {
			if got := string(tx.Bucket([]byte("idx_ws_deployments")).Get(Key(ws, id))); got != name {
				t.Errorf("deployment %s indexed with name %q, want %q", id, got, name)
			}
			for i := 0; i+3 <= len(name); i++ {
				if tx.Bucket([]byte("idx_ws_deployment_trigrams")).Get(Key(ws, name[i:i+3], id)) == nil {
					t.Errorf("deployment %s: trigram %q of its name not indexed", id, name[i:i+3])
				}
			}
		}
		return nil
	})
}
