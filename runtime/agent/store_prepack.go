package agent

import (
	"bytes"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Packing before the writer lock. A flush packs the checkpoint rows of
// every thread whose run ended (store_lgpack.go): under the 16-client
// load of the bench graph, some sixty threads every 250 ms, about 9 ms of
// compression in a commit that held bbolt's writer lock for 15, while
// every journaled write (a run's creation among them) waited. The flusher
// now gathers and compresses those threads in a read transaction first;
// the commit uses a thread's pack only if nothing it was made from has
// changed: no commit came in between (the write transaction is the read
// one's successor, so bbolt is the state the pack was read from, with the
// same horizon) and the thread has no record newer than those packed.
// Anything else is packed in the commit, as before.

// prepacked is what the flusher packed for the commit that follows it.
type prepacked struct {
	txid  int                 // of the read transaction packed from
	last  map[string]uint64   // thread → its last record packed
	packs map[string]*packing // thread → its sealed pack
}

// prepack packs the threads the next flush would pack, outside the
// writer lock, and leaves them for it.
func (s *boltStore) prepack() error {
	tx, err := s.db.Begin(false)
	if err != nil {
		return fmt.Errorf("pack ended threads: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	ops := s.pend.since(horizon(tx), "")
	last := lastSeqs(ops)
	pp := &prepacked{txid: tx.ID(), last: map[string]uint64{}, packs: map[string]*packing{}}
	for _, t := range s.pend.idle(ops) {
		pk, err := gatherPacking(tx, t, ops)
		if err != nil {
			return err
		}
		if err := pk.seal([]byte(t)); err != nil {
			return err
		}
		pp.packs[t], pp.last[t] = pk, last[t]
	}
	s.pend.mu.Lock()
	s.pend.pre = pp
	s.pend.mu.Unlock()
	return nil
}

// takePrepacked hands the flusher's packs to the commit tx, if they were
// read from the state tx starts from; they are taken once either way.
func (p *pendingWrites) takePrepacked(tx *bolt.Tx) *prepacked {
	p.mu.Lock()
	pp := p.pre
	p.pre = nil
	p.mu.Unlock()
	if pp == nil || tx.ID() != pp.txid+1 {
		return nil
	}
	return pp
}

// of is thread's pack if it was made from exactly thread's records up to
// last, its last record now pending.
func (pp *prepacked) of(thread string, last uint64) *packing {
	if pp == nil {
		return nil
	}
	pk, ok := pp.packs[thread]
	if !ok || pp.last[thread] != last {
		return nil
	}
	return pk
}

// lastSeqs maps each thread of ops to the number of its last record there.
func lastSeqs(ops []*wbOp) map[string]uint64 {
	last := make(map[string]uint64)
	for _, op := range ops {
		last[op.thread] = op.seq
	}
	return last
}

// loadPacking gathers thread's rows as bbolt holds them.
func loadPacking(tx *bolt.Tx, thread []byte) (*packing, error) {
	m := &packing{rows: map[string][]byte{}, inLG: map[string][]byte{}}
	if block := tx.Bucket([]byte(bLGPacked)).Get(thread); block != nil {
		rows, err := decodePack(thread, block)
		if err != nil {
			return nil, fmt.Errorf("pack thread %s: %w", thread, err)
		}
		for _, r := range rows {
			m.rows[string(r.k)] = r.v
		}
		m.packed = true
	}
	prefix := append(slices.Clip(thread), 0)
	c := tx.Bucket([]byte(bLG)).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		v = storageCopy(v)
		m.rows[string(k)], m.inLG[string(k)] = v, v
	}
	return m, nil
}

// gatherPacking is thread's checkpoint rows as bbolt holds them (tx) with
// those of ops applied, in order.
func gatherPacking(tx *bolt.Tx, thread string, ops []*wbOp) (*packing, error) {
	pk, err := loadPacking(tx, []byte(thread))
	if err != nil {
		return nil, err
	}
	for _, op := range ops {
		if op.thread != thread {
			continue
		}
		for _, r := range op.rows {
			if !isThreadLG(r, thread) {
				continue
			}
			pk.changed = true
			if err := applyRow(pk, r); err != nil {
				return nil, fmt.Errorf("apply journal record %d: %w", op.seq, err)
			}
		}
	}
	return pk, nil
}

// isThreadLG says whether r is one of thread's checkpoint rows.
func isThreadLG(r wbRow, thread string) bool {
	return r.bucket == bLG && bytes.Equal(lgThreadOf(r.key), []byte(thread))
}

// withoutLG is rows but thread's checkpoint rows (its pack holds them).
func withoutLG(rows []wbRow, thread string) []wbRow {
	rest := make([]wbRow, 0, len(rows))
	for _, r := range rows {
		if !isThreadLG(r, thread) {
			rest = append(rest, r)
		}
	}
	return rest
}
