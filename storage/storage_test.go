package storage

import (
	"errors"
	"path/filepath"
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
