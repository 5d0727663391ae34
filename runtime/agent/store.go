package agent

import (
	"context"
	"errors"
	"time"

	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

// Store is the agent engine's persistence: every record the engine keeps
// (threads with their run queue, runs, checkpoints, assistants, store
// items, crons, TTL entries) is read and written through it, in units of
// work. The engine's logic (admission, multitask strategies, dispatch,
// state) stays in the engine; a Store only keeps rows.
//
// This comment is the contract an implementation meets (the bbolt store,
// store_*.go, is the default; a PostgreSQL one is the next); the
// conformance suite (store_conformance_test.go) checks it.
//
//   - A unit of work is atomic: fn's writes are all kept when Update
//     returns nil and none is kept when fn (or the commit) fails. fn sees
//     its own writes (read-your-writes) and no other unit's uncommitted
//     ones; units of work on the same records are serializable.
//   - fn may run more than once (a group commit re-runs a member alone
//     after a failure in the group, a database retries a serialization
//     failure), so it derives everything from its Tx and its inputs and
//     keeps side effects idempotent.
//   - Readers see every write acknowledged before they began.
//   - Lookups of a missing record return an error wrapping ErrNotFound.
//   - ctx bounds the wait for the database; the bbolt store, in-process,
//     does not wait on the network and ignores it.
//   - Runs are claimed from a thread's queue with a lease (ClaimNextRun):
//     a claim is exclusive, and a run whose lease expired may be claimed
//     by another worker. The engine claims without a lease when it is
//     one process (its restart recovers what was running), and under a
//     lease, skipping threads another worker holds, when it is one of
//     several (Engine.Bus, replicas.go).
//   - Host checkpoint writes are fenced: only the thread's running run
//     may write them (checkpointRowStore).
//   - Subscribers hear of queued and changed runs once they are durable
//     (eventSource); the engine's own dispatch is in-process, or woken
//     through its RunBus across processes (runbus.go).
//
// The record types are the engine's (threadRecord, runRecord, ...), so
// an implementation lives in this package as store_<kind>*.go, or they
// are exported for it. Its schema mirrors the bbolt buckets: a table per
// resource, keyed as the bbolt keys are (a thread's runs, checkpoints and
// checkpoint rows by thread first), the queue in the thread's row (so a
// claim locks one row), and notifications by LISTEN/NOTIFY.
type Store interface {
	// Update runs fn as one unit of work.
	Update(ctx context.Context, fn func(Tx) error) error
	// UpdateThread runs fn as a unit of work confined to one thread's own
	// rows: the thread record and its runs (with their index entries).
	// An implementation may make it durable by a cheaper path than
	// Update (the bbolt store journals the rows, store_writebehind.go).
	// When the path fn takes writes anything else, fn returns errNotHot
	// (the Tx's other writers return it themselves), and UpdateThread
	// returns errNotHot without keeping anything; the caller then uses
	// Update.
	// end ends the thread's running run's fast checkpoint writes in the
	// same step (its later writes are fenced, see Fenced).
	UpdateThread(ctx context.Context, thread string, end bool, fn func(Tx) error) error
	// View runs fn on a consistent snapshot that holds every write
	// acknowledged before it (a scan of threads, a search).
	View(ctx context.Context, fn func(ReadTx) error) error
	// ViewThread is View for a read confined to one thread's rows; an
	// implementation may serve it more cheaply (the bbolt store lays the
	// thread's journaled rows over its snapshot instead of committing
	// them first).
	ViewThread(ctx context.Context, thread string, fn func(ReadTx) error) error
	// ViewCommitted is View for reads of records never written through
	// UpdateThread (assistants, store items, crons, checkpoints read
	// with their own overlay): the bbolt store reads them without first
	// committing journaled thread rows.
	ViewCommitted(ctx context.Context, fn func(ReadTx) error) error

	checkpointRowStore
	eventSource
}

// ReadTx is a unit of work's reads.
type ReadTx interface {
	threadReads
	runReads
	checkpointReads
	assistantReads
	itemReads
	cronReads
	ttlReads
}

// Tx is a unit of work: its reads and its writes.
type Tx interface {
	ReadTx
	threadWrites
	runWrites
	checkpointWrites
	assistantWrites
	itemWrites
	cronWrites
	ttlWrites
	checkpointRowWrites
	queueWrites
}

// boltStore is the Store over the agent's bbolt database: grouped commits
// (storage.Committer) and the write-behind journal (store_writebehind.go)
// in front of them.
type boltStore struct {
	db   *bolt.DB
	w    *storage.Committer
	pend *pendingWrites // journaled writes not yet in bbolt
	subscribers
}

// boltTx is a bbolt transaction as a Tx. track, when set (a journaled
// write), collects the rows the unit of work wrote, in order, for the
// journal.
type boltTx struct {
	tx       *bolt.Tx
	track    *[]wbKey
	scoped   bool                 // one thread's view or unit of work (wholeDB)
	over     map[string]*rowsRead // a one-thread view's journaled rows (read)
	events   []storeEvent         // published once the unit of work is durable
	unpacked []string             // packed threads whose rows it changed (repack)
}

func (t *boltTx) touched(bucket string, key []byte) {
	if t.track == nil {
		return
	}
	for _, k := range *t.track {
		if k.bucket == bucket && string(k.key) == string(key) {
			return // journaled once, as it stands when the unit ends
		}
	}
	*t.track = append(*t.track, wbKey{bucket: bucket, key: key})
}

// added records, in a journaled unit, a delta added to a counter row: the
// journal carries the delta, not the value, because the unit sees only
// its own thread's pending rows, not the other threads' deltas.
func (t *boltTx) added(bucket string, key []byte, delta int64) {
	if t.track == nil {
		return
	}
	for i, k := range *t.track {
		if k.add && k.bucket == bucket && string(k.key) == string(key) {
			(*t.track)[i].delta += delta
			return
		}
	}
	*t.track = append(*t.track, wbKey{bucket: bucket, key: key, add: true, delta: delta})
}

// unconfined refuses, with errNotHot, a write outside the thread's own
// rows in a journaled unit of work (UpdateThread), which journals only
// those: the caller then runs the unit as an Update.
func (t *boltTx) unconfined() error {
	if t.track != nil {
		return errNotHot
	}
	return nil
}

// wholeDB refuses a read across threads in a transaction scoped to one
// thread (ViewThread, UpdateThread): only that thread's pending rows are
// laid over it, without the thread indexes' rows (pendingWrites.overlay),
// so such a read would miss writes already acknowledged. A unit of work
// that meets it runs again as an Update (errNotHot); in a view it is a
// mistake of the caller's.
func (t *boltTx) wholeDB() error {
	if t.scoped {
		return errNotHot
	}
	return nil
}

// boltOf is the bbolt transaction under a Tx of the bbolt store.
func boltOf(tx ReadTx) *bolt.Tx { return tx.(*boltTx).tx }

func (s *boltStore) Update(_ context.Context, fn func(Tx) error) error {
	// fn may run more than once (storage.Committer): the attempt that
	// committed is the last.
	var last *boltTx
	err := s.w.Update(func(tx *bolt.Tx) error {
		last = &boltTx{tx: tx}
		if err := fn(last); err != nil {
			return err
		}
		return last.repack(s.pend)
	})
	if err == nil && last != nil {
		s.publish(last.events)
	}
	return err
}

func (s *boltStore) View(_ context.Context, fn func(ReadTx) error) error {
	return s.view("", func(tx *boltTx) error { return fn(tx) })
}

func (s *boltStore) ViewThread(_ context.Context, thread string, fn func(ReadTx) error) error {
	return s.view(thread, func(tx *boltTx) error { return fn(tx) })
}

func (s *boltStore) ViewCommitted(_ context.Context, fn func(ReadTx) error) error {
	return s.db.View(func(tx *bolt.Tx) error { return fn(&boltTx{tx: tx}) })
}

func (s *boltStore) UpdateThread(_ context.Context, thread string, end bool, fn func(Tx) error) error {
	var bt *boltTx
	err := s.hot(thread, end, func(tx *bolt.Tx) ([]wbKey, error) {
		var keys []wbKey
		bt = &boltTx{tx: tx, track: &keys, scoped: true}
		if err := fn(bt); err != nil {
			return nil, err
		}
		return keys, nil
	})
	if err == nil && bt != nil {
		s.publish(bt.events)
	}
	return err
}

// errStoreClosed is what a store used before Start or after its close says.
var errStoreClosed = errors.New("agent store is not open")

// openBoltStore applies the journal's records beyond the database's
// horizon and starts the store; run flushes the journal until ctx ends.
func openBoltStore(db *bolt.DB, log func(applied, skipped int)) (*boltStore, error) {
	if db == nil {
		return nil, errStoreClosed
	}
	s := &boltStore{db: db, w: &storage.Committer{DB: db}}
	if err := s.openJournal(log); err != nil {
		return nil, err
	}
	return s, nil
}

// run commits the journal's pending rows every every until ctx ends.
func (s *boltStore) run(ctx context.Context, every time.Duration, logErr func(error)) {
	s.flusher(ctx, every, logErr)
}
