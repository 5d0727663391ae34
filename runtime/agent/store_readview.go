package agent

import bolt "go.etcd.io/bbolt"

// Reads in a bbolt read transaction, with journaled rows laid over it in
// memory.
//
// A read of one thread's records (ViewThread) used to lay the thread's
// pending rows over bbolt in a write transaction rolled back: it held the
// writer lock, and so waited for the flusher's commit (an fdatasync) and
// made every write wait for it. The run path reads a thread half a dozen
// times per run (the run, its queue, the request, the graph...), so those
// waits were most of a run creation's tail. Now such a read is a read
// transaction: the thread's journaled rows of the buckets one-thread reads
// use (threadViewBuckets) are laid over it in memory, as the checkpoint
// rows are (reader), and the boltTx reads those buckets through them
// (boltTx.read).

// threadViewBuckets are the buckets a one-thread read reads and a
// journaled write (UpdateThread) writes. The other buckets such a write
// touches are the thread indexes', read only across threads (wholeDB
// refuses that in a one-thread view), or by the writes that maintain
// them; the checkpoint rows have their own reader.
var threadViewBuckets = []string{bThreads, bRuns, bThreadRuns}

// readAt runs fn in a read transaction with the journal's records newer
// than its horizon (thread's only, unless thread is ""). A read
// transaction does not wait for the flusher's commit, so a commit may
// settle records after the transaction began and before they are listed:
// the snapshot lacks them and the list too. That read begins again, in a
// transaction that sees the commit.
func (s *boltStore) readAt(thread string, fn func(tx *bolt.Tx, ops []*wbOp) error) error {
	for {
		again := false
		err := s.db.View(func(tx *bolt.Tx) error {
			var ops []*wbOp
			if s.pend != nil {
				var ok bool
				if ops, ok = s.pend.sinceRead(horizon(tx), thread); !ok {
					again = true
					return nil
				}
			}
			return fn(tx, ops)
		})
		if !again {
			return err
		}
	}
}

// sinceRead is since for a read transaction whose horizon is h: false when
// records above h were settled (dropped) already.
func (p *pendingWrites) sinceRead(h uint64, thread string) ([]*wbOp, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.settled > h {
		return nil, false
	}
	return p.sinceLocked(h, thread), true
}

// view runs fn on the database as it stands with every journaled write
// acknowledged before it. A read of one thread's records (thread not "")
// is a read transaction with that thread's journaled rows laid over it
// (threadViewBuckets). Any other read (a search, a scan) commits what is
// pending first, then reads in a read transaction.
func (s *boltStore) view(thread string, fn func(tx *boltTx) error) error {
	if s.pend == nil || !s.pend.pending(thread) {
		return s.db.View(func(tx *bolt.Tx) error { return fn(&boltTx{tx: tx, scoped: thread != ""}) })
	}
	if thread == "" {
		if err := s.w.Update(func(*bolt.Tx) error { return nil }); err != nil {
			return err
		}
		return s.db.View(func(tx *bolt.Tx) error { return fn(&boltTx{tx: tx}) })
	}
	return s.readAt(thread, func(tx *bolt.Tx, ops []*wbOp) error {
		t := &boltTx{tx: tx, scoped: true}
		if len(ops) > 0 {
			t.over = make(map[string]*rowsRead, len(threadViewBuckets))
			for _, b := range threadViewBuckets {
				if r := layRows(boltBase{tx.Bucket([]byte(b))}, b, ops); r.over != nil {
					t.over[b] = r
				}
			}
		}
		return fn(t)
	})
}

// pending reports whether thread ("": any) may have rows not in bbolt.
func (p *pendingWrites) pending(thread string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if thread == "" {
		return len(p.ops) > 0
	}
	return len(p.byThread[thread]) > 0
}

// read returns bucket as the unit of work reads it: bbolt's, or in a
// one-thread view, with the thread's journaled rows laid over it. Every
// read of a threadViewBuckets bucket goes through it.
func (t *boltTx) read(bucket string) *rowsRead {
	if r := t.over[bucket]; r != nil {
		return r
	}
	if b := t.tx.Bucket([]byte(bucket)); b != nil {
		return &rowsRead{b: boltBase{b}}
	}
	return &rowsRead{b: memRows(nil)} // created by the migrations: never
}
