package storage

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestMigrationsRunInOrderOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	var calls []int
	ms := []Migration{
		{Version: 1, Name: "one", Apply: func(tx *bolt.Tx) error { calls = append(calls, 1); return CreateBuckets(tx, "a") }},
		{Version: 2, Name: "two", Apply: func(tx *bolt.Tx) error { calls = append(calls, 2); return CreateBuckets(tx, "b") }},
	}
	db, err := Open(path, time.Second, ms)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = Open(path, time.Second, ms)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if len(calls) != 2 || calls[0] != 1 || calls[1] != 2 {
		t.Fatalf("calls = %v", calls)
	}
	_ = db.View(func(tx *bolt.Tx) error {
		if Version(tx) != 2 {
			t.Errorf("version = %d", Version(tx))
		}
		return nil
	})
}

func TestSecondOpenFailsFast(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, err := Open(path, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	start := time.Now()
	_, err = Open(path, 200*time.Millisecond, nil)
	if !errors.Is(err, ErrInUse) {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatal("second open hung")
	}
}

func TestBadMigrationNumbering(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "db"), time.Second, []Migration{{Version: 2, Name: "x"}})
	if err == nil {
		t.Fatal("want error")
	}
}

// TestNewerSchemaRefused: a binary does not open a database that a newer
// one migrated further (a downgrade), and says so.
func TestNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	ms := []Migration{
		{Version: 1, Name: "one", Apply: func(tx *bolt.Tx) error { return CreateBuckets(tx, "a") }},
		{Version: 2, Name: "two", Apply: func(tx *bolt.Tx) error { return CreateBuckets(tx, "b") }},
	}
	db, err := Open(path, time.Second, ms)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, tc := range []struct {
		name string
		ms   []Migration
		want error
	}{
		{"older binary", ms[:1], ErrSchemaNewer},
		{"same binary", ms, nil},
		{"no migrations", nil, nil},
	} {
		db, err := Open(path, time.Second, tc.ms)
		if !errors.Is(err, tc.want) {
			t.Fatalf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
		if err == nil {
			db.Close()
		} else if strings.Contains(err.Error(), path) {
			t.Fatalf("%s: the error names the path: %v", tc.name, err)
		}
	}
}
