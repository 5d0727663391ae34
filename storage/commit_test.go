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
