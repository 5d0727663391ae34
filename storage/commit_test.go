package storage

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestCommitterGroupsAndIsolatesFailures(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "db"), time.Second, []Migration{
		{Version: 1, Name: "b", Apply: func(tx *bolt.Tx) error { return CreateBuckets(tx, "b") }},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := &Committer{DB: db}
	boom := errors.New("boom")
	var wg sync.WaitGroup
	errs := make([]error, 200)
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs[i] = c.Update(func(tx *bolt.Tx) error {
				if err := tx.Bucket([]byte("b")).Put([]byte(fmt.Sprint(i)), []byte("x")); err != nil {
					return err
				}
				if i%7 == 0 {
					return boom // after writing: the write must not survive
				}
				return nil
			})
		}(i)
	}
	wg.Wait()
	_ = db.View(func(tx *bolt.Tx) error {
		for i, err := range errs {
			got := tx.Bucket([]byte("b")).Get([]byte(fmt.Sprint(i)))
			if i%7 == 0 {
				if !errors.Is(err, boom) || got != nil {
					t.Errorf("%d: err %v, value %q; want boom and no value", i, err, got)
				}
			} else if err != nil || got == nil {
				t.Errorf("%d: err %v, value %q", i, err, got)
			}
		}
		return nil
	})
}

// TestDenseBucketsSplitFull appends time-ordered keys through a Committer
// to a bucket it lists as dense and to one it does not: the dense one's
// leaves end up nearly full, the other's about half empty (bbolt's
// default split), which is what made the control plane's files twice
// their data.
func TestDenseBucketsSplitFull(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "db"), time.Second, []Migration{
		{Version: 1, Name: "b", Apply: func(tx *bolt.Tx) error { return CreateBuckets(tx, "dense", "plain") }},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := &Committer{DB: db, Dense: []string{"dense"}}
	for i := 0; i < 200; i++ {
		err := c.Update(func(tx *bolt.Tx) error {
			for j := 0; j < 50; j++ {
				k, v := Key(NewID()), make([]byte, 100)
				if err := errors.Join(tx.Bucket([]byte("dense")).Put(k, v), tx.Bucket([]byte("plain")).Put(k, v)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	fill := func(name string) float64 {
		var s bolt.BucketStats
		_ = db.View(func(tx *bolt.Tx) error { s = tx.Bucket([]byte(name)).Stats(); return nil })
		return float64(s.LeafInuse) / float64(s.LeafAlloc)
	}
	if f := fill("dense"); f < 0.8 {
		t.Errorf("dense bucket's leaves %.0f%% full, want at least 80%%", f*100)
	}
	if f := fill("plain"); f > 0.65 {
		t.Errorf("plain bucket's leaves %.0f%% full: the test no longer shows the default split", f*100)
	}
}

// TestControlPlaneDenseBucketsExist guards the list against a misspelt or
// renamed bucket, which Densify would skip silently.
func TestControlPlaneDenseBucketsExist(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "db"), time.Second, ControlPlaneMigrations)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_ = db.View(func(tx *bolt.Tx) error {
		for _, name := range ControlPlaneDense {
			if tx.Bucket([]byte(name)) == nil {
				t.Errorf("ControlPlaneDense names %q, which the migrations do not create", name)
			}
		}
		return nil
	})
}
