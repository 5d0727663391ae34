package storage

import (
	"sync"

	bolt "go.etcd.io/bbolt"
)

// Committer groups concurrent writers into shared bbolt transactions: one
// commit (one fsync) makes many writes durable at once. Unlike bolt.Batch
// it adds no delay: a writer that finds no commit in flight commits at once,
// and writers arriving meanwhile go together in the next commit.
//
// A function may run more than once (a failure in a group re-runs each
// member alone), so it must derive everything from tx and its own inputs.
type Committer struct {
	DB *bolt.DB
	// Prepare, when set, runs first in every transaction (a write-behind
	// owner applying what it holds); the function it returns runs after
	// that transaction committed.
	Prepare func(*bolt.Tx) (func(), error)
	// Dense names the buckets whose keys grow at the end (UUIDv7 ids,
	// sequence numbers): their leaves are split full (DenseFill) rather
	// than in half, since no key will land in the older half.
	Dense []string

	mu      sync.Mutex
	queue   []*commitCall
	running bool
}

// DenseFill is the fill factor of buckets whose keys are appended in
// order: bbolt splits a leaf at FillPercent (half by default), and an
// append-only bucket never fills the older half again, so its pages would
// stay about half empty and the file twice its data.
const DenseFill = 0.9

// Densify sets DenseFill on the named buckets for the rest of tx (bbolt
// keeps a transaction's bucket handles, and reads the fill factor when the
// transaction commits).
func Densify(tx *bolt.Tx, buckets ...string) {
	for _, name := range buckets {
		if b := tx.Bucket([]byte(name)); b != nil {
			b.FillPercent = DenseFill
		}
	}
}

type commitCall struct {
	fn   func(*bolt.Tx) error
	done chan error
}

// Update runs fn in a durable read-write transaction, possibly shared.
func (c *Committer) Update(fn func(*bolt.Tx) error) error {
	call := &commitCall{fn: fn, done: make(chan error, 1)}
	c.mu.Lock()
	c.queue = append(c.queue, call)
	if c.running {
		c.mu.Unlock()
		return <-call.done
	}
	c.running = true
	for len(c.queue) > 0 {
		group := c.queue
		c.queue = nil
		c.mu.Unlock()
		c.commit(group)
		c.mu.Lock()
	}
	c.running = false
	c.mu.Unlock()
	return <-call.done
}

// errGroupFailed rolls a shared transaction back when one member fails, so
// no member's partial writes survive; each member then runs alone.
type errGroupFailed struct{}

func (errGroupFailed) Error() string { return "group member failed" }

// update is DB.Update with Prepare first and its follow-up after.
func (c *Committer) update(fn func(*bolt.Tx) error) error {
	var after func()
	err := c.DB.Update(func(tx *bolt.Tx) error {
		after = nil
		Densify(tx, c.Dense...)
		if c.Prepare != nil {
			var err error
			if after, err = c.Prepare(tx); err != nil {
				return err
			}
		}
		return fn(tx)
	})
	if err == nil && after != nil {
		after()
	}
	return err
}

func (c *Committer) commit(group []*commitCall) {
	if len(group) > 1 {
		err := c.update(func(tx *bolt.Tx) error {
			for _, call := range group {
				if err := call.fn(tx); err != nil {
					return errGroupFailed{}
				}
			}
			return nil
		})
		if err == nil {
			for _, call := range group {
				call.done <- nil
			}
			return
		}
		if _, ok := err.(errGroupFailed); !ok {
			// The commit itself failed: nothing is durable for anyone.
			for _, call := range group {
				call.done <- err
			}
			return
		}
	}
	for _, call := range group {
		call.done <- c.update(call.fn)
	}
}
