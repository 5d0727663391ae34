package agent

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

// Checkpoint writes of a running run go to a journal, not to a bbolt
// commit each. A run of a three-node graph saves five checkpoints and four
// sets of pending writes, each durable before the host's saver gets its
// answer; as bbolt commits that was nine commits a run, each rewriting
// whole pages (leaf, branches, root, freelist, meta) and flushing twice,
// and a run creation's commit queued behind them. Journaled, a write is
// one group-committed append and one fdatasync of a small file, its bytes
// about the rows' own; the rows reach bbolt in a transaction the engine
// makes anyway: the one that ends the run. Until then they are held in
// memory (lgPending), and whatever reads or changes the thread's
// checkpoints first moves them into its own transaction (updateLG), so
// readers never need to merge the two.
//
// Only the thread's active run journals its writes (lgPending.owner, set
// when the run starts executing and cleared in the transaction that ends
// it): that is the fence cpPut enforced in bbolt, kept in memory. Any
// other write (update_state outside a run, a graph writing another
// thread, a late write from a cancelled run) takes the fenced bbolt
// commit as before. On start the journal's records are applied again,
// each still fenced: a record of a run that has ended was applied (or
// rolled back) by the transaction that ended it, and is skipped.

// lgRow is one row of the lg bucket a journaled write puts.
type lgRow struct {
	mode     byte
	key, val []byte
}

const (
	rowPut        byte = 'p' // put
	rowPutNew     byte = 'n' // put unless the key exists (a task's regular writes)
	rowPutChanged byte = 'c' // put unless the same typed value is stored (channel values)
)

// applyRows puts rows into the lg bucket as cpPut and cpPutWrites did.
func applyRows(lg *bolt.Bucket, rows []lgRow) error {
	for _, r := range rows {
		switch r.mode {
		case rowPutNew:
			if lg.Get(r.key) != nil {
				continue
			}
		case rowPutChanged:
			// A value sent again unchanged (a saver sending every
			// channel, a retried put) is not rewritten: its row, and the
			// run it names for rollbacks, stay. A different value under
			// the same version replaces it: JavaScript savers number
			// versions 1, 2, 3…, so a fork can reuse one.
			if old := lg.Get(r.key); old != nil {
				prev, err1 := decodeBlob(old)
				next, err2 := decodeBlob(r.val)
				if err1 == nil && err2 == nil && prev.T == next.T && bytes.Equal(prev.B, next.B) {
					continue
				}
			}
		}
		if err := lg.Put(r.key, r.val); err != nil {
			return err
		}
	}
	return nil
}

// lgOp is one journaled write: rows of one thread by its active run.
type lgOp struct {
	thread, run string
	rows        []lgRow
	seg         uint64 // journal segment holding it
}

const lgOpVersion = 1

func (op *lgOp) encode() []byte {
	n := 16 + len(op.thread) + len(op.run)
	for _, r := range op.rows {
		n += 12 + len(r.key) + len(r.val)
	}
	b := make([]byte, 0, n)
	b = append(b, lgOpVersion)
	b = binary.AppendUvarint(b, uint64(len(op.thread)))
	b = append(b, op.thread...)
	b = binary.AppendUvarint(b, uint64(len(op.run)))
	b = append(b, op.run...)
	b = binary.AppendUvarint(b, uint64(len(op.rows)))
	for _, r := range op.rows {
		b = append(b, r.mode)
		b = binary.AppendUvarint(b, uint64(len(r.key)))
		b = append(b, r.key...)
		b = binary.AppendUvarint(b, uint64(len(r.val)))
		b = append(b, r.val...)
	}
	return b
}

var errBadOp = errors.New("malformed journal record")

func decodeOp(b []byte) (*lgOp, error) {
	if len(b) == 0 || b[0] != lgOpVersion {
		return nil, errBadOp
	}
	b = b[1:]
	next := func() ([]byte, error) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, errBadOp
		}
		v := b[k : k+int(n)]
		b = b[k+int(n):]
		return v, nil
	}
	thread, err := next()
	if err != nil {
		return nil, err
	}
	run, err := next()
	if err != nil {
		return nil, err
	}
	count, k := binary.Uvarint(b)
	if k <= 0 || count > uint64(len(b)) {
		return nil, errBadOp
	}
	b = b[k:]
	op := &lgOp{thread: string(thread), run: string(run), rows: make([]lgRow, 0, count)}
	for i := uint64(0); i < count; i++ {
		if len(b) == 0 {
			return nil, errBadOp
		}
		mode := b[0]
		b = b[1:]
		key, err := next()
		if err != nil {
			return nil, err
		}
		val, err := next()
		if err != nil {
			return nil, err
		}
		op.rows = append(op.rows, lgRow{mode: mode, key: key, val: val})
	}
	if len(b) != 0 {
		return nil, errBadOp
	}
	return op, nil
}

// lgPending holds journaled writes until a bbolt transaction takes them.
type lgPending struct {
	j *storage.Journal // nil: nothing is journaled

	mu    sync.Mutex
	owner map[string]string  // thread → the run whose writes are journaled
	ops   map[string][]*lgOp // thread → writes not yet in bbolt, in order
}

// own starts journaling run's writes to thread.
func (p *lgPending) own(thread, run string) {
	if p == nil || p.j == nil {
		return
	}
	p.mu.Lock()
	p.owner[thread] = run
	p.mu.Unlock()
}

// journal makes rows durable in the journal when run is thread's owner;
// false: the caller commits them to bbolt, fenced.
func (p *lgPending) journal(thread, run string, rows []lgRow) (bool, error) {
	if p == nil || p.j == nil || run == "" {
		return false, nil
	}
	p.mu.Lock()
	ok := p.owner[thread] == run
	p.mu.Unlock()
	if !ok {
		return false, nil
	}
	op := &lgOp{thread: thread, run: run, rows: rows}
	seg, err := p.j.Append(op.encode())
	if err != nil {
		return true, fmt.Errorf("journal checkpoint write: %w", err)
	}
	op.seg = seg
	p.mu.Lock()
	if p.owner[thread] != run {
		// The run ended while the write was being flushed: the fenced
		// commit decides, as for any write after the end.
		p.mu.Unlock()
		p.j.Release(seg, 1)
		return false, nil
	}
	p.ops[thread] = append(p.ops[thread], op)
	p.mu.Unlock()
	return true, nil
}

// has reports whether thread ("": any) has writes not yet in bbolt.
func (p *lgPending) has(thread string) bool {
	if p == nil || p.j == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if thread == "" {
		return len(p.ops) > 0
	}
	return len(p.ops[thread]) > 0
}

// take returns thread's writes not yet in bbolt (every thread's for "");
// with end, the thread's run journals no more. They stay listed until
// settled, so a transaction that runs again takes them again.
func (p *lgPending) take(thread string, end bool) []*lgOp {
	if p == nil || p.j == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if end {
		delete(p.owner, thread)
	}
	if thread != "" {
		return append([]*lgOp(nil), p.ops[thread]...)
	}
	var out []*lgOp
	for _, ops := range p.ops {
		out = append(out, ops...)
	}
	return out
}

// settled drops ops a committed transaction holds and releases their
// journal records. An op two transactions took is released once.
func (p *lgPending) settled(ops []*lgOp) {
	if len(ops) == 0 {
		return
	}
	p.mu.Lock()
	var release []uint64
	for _, op := range ops {
		list := p.ops[op.thread]
		for i, o := range list {
			if o == op {
				list = append(list[:i], list[i+1:]...)
				release = append(release, op.seg)
				break
			}
		}
		if len(list) == 0 {
			delete(p.ops, op.thread)
		} else {
			p.ops[op.thread] = list
		}
	}
	p.mu.Unlock()
	for _, seg := range release {
		p.j.Release(seg, 1)
	}
}

// updateLG runs fn in a durable transaction that first moves thread's
// journaled writes into bbolt (every thread's for ""); end also stops
// journaling for the thread's run (the transaction ends the run or the
// thread). fn may be nil: a flush before reading.
func (e *Engine) updateLG(thread string, end bool, fn func(*bolt.Tx) error) error {
	var ops []*lgOp
	err := e.w.Update(func(tx *bolt.Tx) error {
		ops = e.pend.take(thread, end)
		if len(ops) > 0 {
			lg := lgBucket(tx)
			for _, op := range ops {
				if err := applyRows(lg, op.rows); err != nil {
					return err
				}
			}
		}
		if fn == nil {
			return nil
		}
		return fn(tx)
	})
	if err == nil {
		e.pend.settled(ops)
	}
	return err
}

// flushLG moves thread's journaled writes (every thread's for "") into
// bbolt before they are read.
func (e *Engine) flushLG(thread string) error {
	if !e.pend.has(thread) {
		return nil
	}
	return e.updateLG(thread, false, nil)
}

// openJournal applies what the journal holds from before a stop, each
// record fenced, then starts it afresh beside the database.
func (e *Engine) openJournal() error {
	dir := e.DB.Path() + ".journal"
	recs, err := storage.ReadJournal(dir)
	if err != nil {
		return err
	}
	if len(recs) > 0 {
		applied, skipped := 0, 0
		err := e.w.Update(func(tx *bolt.Tx) error {
			applied, skipped = 0, 0
			lg := lgBucket(tx)
			for _, rec := range recs {
				op, err := decodeOp(rec)
				if err != nil {
					skipped++
					continue
				}
				if fence(tx, op.thread, op.run) != nil {
					skipped++ // its run ended: the end's transaction applied it, or rolled it back
					continue
				}
				if err := applyRows(lg, op.rows); err != nil {
					return err
				}
				applied++
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("apply the checkpoint journal: %w", err)
		}
		e.Log.Info().Int("applied", applied).Int("skipped", skipped).Msg("checkpoint journal replayed")
	}
	j, err := storage.OpenJournal(dir)
	if err != nil {
		return err
	}
	e.pend = &lgPending{j: j, owner: map[string]string{}, ops: map[string][]*lgOp{}}
	return nil
}

// lgRead reads the lg bucket as it will stand once a thread's journaled
// writes are applied: bbolt's rows with the journaled ones laid over them.
// Readers (the host's getTuple and list, mostly during the very run that
// wrote) then need no commit to see what they wrote.
type lgRead struct {
	b    *bolt.Bucket
	over map[string][]byte
	keys []string // over's keys, sorted
}

// reader returns the lg bucket of tx with thread's journaled rows over it.
func (p *lgPending) reader(tx *bolt.Tx, thread string) *lgRead {
	r := &lgRead{b: tx.Bucket([]byte(bLG))}
	var ops []*lgOp
	if p != nil && p.j != nil && thread != "" {
		p.mu.Lock()
		ops = append(ops, p.ops[thread]...)
		p.mu.Unlock()
	}
	if len(ops) == 0 {
		return r
	}
	r.over = map[string][]byte{}
	for _, op := range ops {
		for _, row := range op.rows {
			k := string(row.key)
			if row.mode == rowPutNew {
				if _, ok := r.over[k]; ok || r.b.Get(row.key) != nil {
					continue
				}
			}
			// rowPutChanged keeps the stored row when the value is the
			// same; the row differs only in the run it names, which
			// readers do not see.
			r.over[k] = row.val
		}
	}
	r.keys = make([]string, 0, len(r.over))
	for k := range r.over {
		r.keys = append(r.keys, k)
	}
	sort.Strings(r.keys)
	return r
}

func (r *lgRead) get(k []byte) []byte {
	if v, ok := r.over[string(k)]; ok {
		return v
	}
	return r.b.Get(k)
}

// scan calls fn for every row whose key has prefix, in key order, until
// fn returns false.
func (r *lgRead) scan(prefix []byte, fn func(k, v []byte) bool) {
	i := sort.SearchStrings(r.keys, string(prefix))
	c := r.b.Cursor()
	k, v := c.Seek(prefix)
	for {
		bk := k != nil && bytes.HasPrefix(k, prefix)
		ok := i < len(r.keys) && strings.HasPrefix(r.keys[i], string(prefix))
		switch {
		case !bk && !ok:
			return
		case ok && (!bk || r.keys[i] <= string(k)):
			if bk && r.keys[i] == string(k) {
				k, v = c.Next() // laid over
			}
			if !fn([]byte(r.keys[i]), r.over[r.keys[i]]) {
				return
			}
			i++
		default:
			if !fn(k, v) {
				return
			}
			k, v = c.Next()
		}
	}
}

// last returns the row with the greatest key that has prefix, or nils.
func (r *lgRead) last(prefix []byte) ([]byte, []byte) {
	c := r.b.Cursor()
	k, v := c.Seek(append(storageCopy(prefix), 0xff))
	if k == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	if k != nil && !bytes.HasPrefix(k, prefix) {
		k, v = nil, nil
	}
	// The overlay's greatest key under prefix.
	i := sort.SearchStrings(r.keys, string(prefix)+"\xff") - 1
	if i >= 0 && strings.HasPrefix(r.keys[i], string(prefix)) && (k == nil || r.keys[i] >= string(k)) {
		return []byte(r.keys[i]), r.over[r.keys[i]]
	}
	return k, v
}
