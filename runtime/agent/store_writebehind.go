package agent

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

// Write-behind: the run path's writes are made durable in a journal and
// reach bbolt in batches.
//
// A run of a small graph used to cost about a dozen bbolt commits: the
// thread's creation, the run's admission, the end of the run, and a
// checkpoint or a set of pending writes per superstep. Each commit
// rewrites whole pages (a leaf and its branches per bucket touched, the
// root, the freelist, the meta page) and flushes twice, and a run
// creation's commit queued behind the others'. Now those writes are
// physical rows (bucket, key, value) appended to a group-committed journal
// beside the database, one fdatasync of about the rows' own bytes, and
// acknowledged then; a flusher applies every pending row to bbolt in one
// commit every flushEvery, as does any other bbolt commit the engine makes
// (storage.Committer.Prepare), so bbolt always holds a prefix of the
// journal. The meta bucket's journalHorizon names the last record applied,
// in the same transaction as the rows.
//
// Consistency. Writes on the run path (hot, below) run their usual code in
// a bbolt write transaction that is rolled back: bbolt's writer lock orders
// them with every commit, and the transaction first lays the thread's
// pending rows newer than the horizon over bbolt's, so the code reads what
// it would read had every write been committed. The rows it wrote are read
// back and journaled before the lock is released. Readers lay the rows over
// a read transaction in memory (store_readview.go; rowsRead for checkpoint
// rows). A record newer than the horizon a transaction reads is newer
// than anything bbolt holds for its keys, because records are numbered
// under the writer lock or, for checkpoint rows, under pendingWrites.mu
// together with the fence they passed.
//
// Checkpoint writes (cp.put, cp.putWrites) of the thread's running run go
// to the journal without the writer lock: only that run writes its rows,
// and whatever deletes them (a rollback, a thread's deletion) first stops
// journaling for the thread (disown) under the same lock. Any other writer
// takes the fenced bbolt commit. After a crash the records newer than the
// horizon are applied in order: the state every acknowledged write saw.

// flushEvery bounds how long rows wait for their bbolt commit (and how
// many pile up in memory between commits).
const flushEvery = 250 * time.Millisecond

// journalHorizon is the meta bucket's key for the last journal record
// applied to bbolt.
var journalHorizon = []byte("journal_applied")

// pendingWrites holds journaled records until a bbolt commit applies them.
type pendingWrites struct {
	j *storage.Journal

	mu       sync.Mutex
	next     uint64             // the next record's number
	ops      []*wbOp            // not yet known applied, in order
	byThread map[string][]*wbOp // the same, by thread
	owner    map[string]string  // thread → the run whose checkpoint writes are journaled
	settled  uint64             // the last record known applied (readAt)
	pre      *prepacked         // the flusher's packs for the next commit
	kick     chan struct{}      // wakes the flusher early
}

// add numbers and enqueues a record of thread's rows; the caller holds
// p.mu and waits on the ticket after releasing it.
func (p *pendingWrites) add(thread string, rows []wbRow) (*storage.JournalTicket, error) {
	op := &wbOp{seq: p.next, thread: thread, rows: rows}
	t, err := p.j.Enqueue(op.encode(), op.seq)
	if err != nil {
		return nil, fmt.Errorf("journal a write: %w", err)
	}
	p.next++
	p.ops = append(p.ops, op)
	p.byThread[thread] = append(p.byThread[thread], op)
	if len(p.ops) == 4096 {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
	return t, nil
}

// since returns thread's records numbered above h (every thread's for ""),
// in order.
func (p *pendingWrites) since(h uint64, thread string) []*wbOp {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sinceLocked(h, thread)
}

func (p *pendingWrites) sinceLocked(h uint64, thread string) []*wbOp {
	list := p.ops
	if thread != "" {
		list = p.byThread[thread]
	}
	i := sort.Search(len(list), func(i int) bool { return list[i].seq > h })
	return append([]*wbOp(nil), list[i:]...)
}

// settle drops the records a committed transaction applied and releases
// their journal segments.
func (p *pendingWrites) settle(h uint64) {
	p.mu.Lock()
	i := sort.Search(len(p.ops), func(i int) bool { return p.ops[i].seq > h })
	for _, op := range p.ops[:i] {
		list := p.byThread[op.thread]
		k := sort.Search(len(list), func(k int) bool { return list[k].seq > h })
		if k == len(list) {
			delete(p.byThread, op.thread)
		} else if k > 0 {
			p.byThread[op.thread] = append([]*wbOp(nil), list[k:]...)
		}
	}
	p.ops = append([]*wbOp(nil), p.ops[i:]...)
	p.settled = max(p.settled, h)
	p.mu.Unlock()
	p.j.ReleaseThrough(h)
}

func horizon(tx *bolt.Tx) uint64 {
	if v := tx.Bucket([]byte("meta")).Get(journalHorizon); len(v) == 8 {
		return storage.U64ToInt(v)
	}
	return 0
}

// prepare is the Committer's first step in every transaction: the
// pending records go to bbolt, in order, with the horizon.
func (p *pendingWrites) prepare(tx *bolt.Tx) (func(), error) {
	h := horizon(tx)
	ops := p.since(h, "")
	if len(ops) == 0 {
		return nil, nil
	}
	// The checkpoint rows of threads whose run has ended are gathered in
	// memory and packed, never put in lg only to be deleted from it. The
	// flusher packed most of them before it took the writer lock
	// (prepack), against this very state of the database.
	pre := p.takePrepacked(tx)
	idle := p.idle(ops)
	var lastOf map[string]uint64
	if pre != nil {
		lastOf = lastSeqs(ops)
	}
	packs := make(map[string]*packing, len(idle))
	for _, t := range idle {
		pk := pre.of(t, lastOf[t])
		if pk == nil {
			var err error
			if pk, err = gatherPacking(tx, t, ops); err != nil {
				return nil, err
			}
		}
		packs[t] = pk
	}
	var rows []wbRow
	for _, op := range ops {
		if _, ok := packs[op.thread]; ok && hasLG(op.rows) {
			rows = append(rows, withoutLG(op.rows, op.thread)...)
		} else {
			rows = append(rows, op.rows...)
		}
	}
	first, last := ops[0].seq, ops[len(ops)-1].seq
	if err := applyRows(tx, coalesce(rows)); err != nil {
		return nil, fmt.Errorf("apply journal records %d to %d: %w", first, last, err)
	}
	for _, t := range idle {
		if err := packs[t].store(tx, []byte(t)); err != nil {
			return nil, err
		}
	}
	if err := tx.Bucket([]byte("meta")).Put(journalHorizon, storage.U64(last)); err != nil {
		return nil, err
	}
	return func() { p.settle(last) }, nil
}

// idle lists, in order, the threads of ops whose run no longer writes
// checkpoints through the journal (it ended, or none runs): the flush
// packs their rows. A thread whose next run starts meanwhile is unpacked
// by its first write, so this decides only what is worth packing.
func (p *pendingWrites) idle(ops []*wbOp) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, op := range ops {
		if _, running := p.owner[op.thread]; op.thread == "" || running || seen[op.thread] {
			continue
		}
		seen[op.thread] = true
		out = append(out, op.thread)
	}
	sort.Strings(out)
	return out
}

// overlay lays thread's records newer than tx's horizon over tx (a write
// transaction the caller rolls back), except the rows no one-thread read
// needs (overlaid): putting them costs most of a read's time.
//
// A run's checkpoint rows are most of what is pending (two dozen rows of
// the bench graph). They are read through ViewCheckpointRows (rowsRead lays
// them over itself), and a journaled unit of work may not touch them
// (boltTx.ScanCheckpointRows and its writes refuse with errNotHot).
//
// The thread indexes' rows (but the attributes row, what a thread's write
// reads to replace them) are read only across threads, which a scoped
// transaction refuses (boltTx.wholeDB). A write replaces them without
// reading them: the rows it journals are what it put or deleted.
func (p *pendingWrites) overlay(tx *bolt.Tx, thread string) error {
	for _, op := range p.since(horizon(tx), thread) {
		rows := op.rows
		if !allOverlaid(rows) {
			rows = overlaidRows(rows)
		}
		if err := applyRows(tx, rows); err != nil {
			return fmt.Errorf("lay journal record %d over the database: %w", op.seq, err)
		}
	}
	return nil
}

// overlaid says whether overlay lays rows of bucket: not the checkpoint
// rows, nor the thread indexes' but their attributes row.
func overlaid(bucket string) bool {
	return bucket == bThreadsAttr || bucket != bLG && !slices.Contains(threadIndexBuckets, bucket)
}

func allOverlaid(rows []wbRow) bool {
	for _, r := range rows {
		if !overlaid(r.bucket) {
			return false
		}
	}
	return true
}

func overlaidRows(rows []wbRow) []wbRow {
	out := make([]wbRow, 0, len(rows))
	for _, r := range rows {
		if overlaid(r.bucket) {
			out = append(out, r)
		}
	}
	return out
}

func hasLG(rows []wbRow) bool {
	for _, r := range rows {
		if r.bucket == bLG {
			return true
		}
	}
	return false
}

// own starts journaling run's checkpoint writes to thread.
func (p *pendingWrites) own(thread, run string) {
	p.mu.Lock()
	p.owner[thread] = run
	p.mu.Unlock()
}

// running reports whether a run of thread writes its checkpoints through
// the journal.
func (p *pendingWrites) running(thread string) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.owner[thread]
	return ok
}

// disown stops it: what comes after takes the fenced commit.
func (p *pendingWrites) disown(thread string) {
	p.mu.Lock()
	delete(p.owner, thread)
	p.mu.Unlock()
}

// journalLG journals checkpoint rows when run is thread's owner; false:
// the caller commits them to bbolt, fenced.
func (p *pendingWrites) journalLG(thread, run string, rows []wbRow) (bool, error) {
	if run == "" {
		return false, nil
	}
	p.mu.Lock()
	if p.owner[thread] != run {
		p.mu.Unlock()
		return false, nil
	}
	t, err := p.add(thread, rows)
	p.mu.Unlock()
	if err != nil {
		return true, err
	}
	// A run's checkpoints share flushes: the host waits for each, but a
	// flush apiece cost a disk block per checkpoint (storage.WaitBatched).
	return true, t.WaitBatched()
}

// wbKey names a row a hot write may have written.
type wbKey struct {
	bucket string
	key    []byte
	add    bool // a counter's delta (boltTx.added), journaled as rowAdd
	delta  int64
}

// errNotHot sends a hot write whose code took a path touching more than
// the rows it names (a rollback, a temporary thread's deletion) to a bbolt
// commit instead.
var errNotHot = errors.New("not a journaled write")

// hot runs fn as a journaled write on thread: in a bbolt write transaction
// with the thread's pending rows laid over, rolled back after the rows
// fn names (as it left them) are journaled. end also stops journaling the
// thread's checkpoint writes, in the same step. fn may return errNotHot;
// hot then returns it having written nothing.
func (s *boltStore) hot(thread string, end bool, fn func(tx *bolt.Tx) ([]wbKey, error)) error {
	tx, err := s.db.Begin(true)
	if err != nil {
		return fmt.Errorf("begin a journaled write: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := s.pend.overlay(tx, thread); err != nil {
		return err
	}
	keys, err := fn(tx)
	if err != nil {
		return err
	}
	rows := make([]wbRow, 0, len(keys))
	for _, k := range keys {
		b := tx.Bucket([]byte(k.bucket))
		if b == nil {
			return fmt.Errorf("journaled write: no bucket %q", k.bucket)
		}
		if k.add {
			if k.delta != 0 {
				rows = append(rows, wbRow{bucket: k.bucket, mode: rowAdd, key: storageCopy(k.key),
					val: binary.BigEndian.AppendUint64(nil, uint64(k.delta))})
			}
			continue
		}
		// A cursor, not Get: index rows have empty values.
		if ck, v := b.Cursor().Seek(k.key); ck != nil && bytes.Equal(ck, k.key) {
			rows = append(rows, wbRow{bucket: k.bucket, mode: rowPut, key: storageCopy(k.key), val: storageCopy(v)})
		} else {
			rows = append(rows, wbRow{bucket: k.bucket, mode: rowDelete, key: storageCopy(k.key)})
		}
	}
	s.pend.mu.Lock()
	if end {
		delete(s.pend.owner, thread)
	}
	if len(rows) == 0 {
		s.pend.mu.Unlock()
		return nil
	}
	t, err := s.pend.add(thread, rows)
	s.pend.mu.Unlock()
	if err != nil {
		return err
	}
	// The rows are numbered and listed: the writer lock can go before the
	// flush, so the next write need not wait for it.
	_ = tx.Rollback()
	if end {
		// A run's end shares a flush with its thread's last checkpoints
		// and other runs' as they do (journalLG); a client's creation of
		// a thread or a run takes a flush of its own.
		return t.WaitBatched()
	}
	return t.Wait()
}

// flusher commits the pending rows every flushEvery (sooner when many
// pile up), so bbolt stays close behind the journal.
func (s *boltStore) flusher(ctx context.Context, every time.Duration, logErr func(error)) {
	tick := time.NewTicker(cmp.Or(every, flushEvery))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			// What is pending is in the journal: the next start applies it.
			return
		case <-tick.C:
		case <-s.pend.kick:
		}
		if !s.pend.pending("") {
			continue
		}
		if err := s.prepack(); err != nil {
			logErr(err) // the flush packs those threads itself
		}
		if err := s.w.Update(func(*bolt.Tx) error { return nil }); err != nil {
			logErr(err)
		}
	}
}

// openJournal applies what the journal holds beyond the database's
// horizon, in order, then starts it afresh beside the database.
func (s *boltStore) openJournal(logReplay func(applied, skipped int)) error {
	dir := s.db.Path() + ".journal"
	recs, err := storage.ReadJournal(dir)
	if err != nil {
		return err
	}
	var last uint64
	err = s.db.Update(func(tx *bolt.Tx) error {
		h := horizon(tx)
		last = h
		applied, skipped := 0, 0
		for _, rec := range recs {
			op, err := decodeOp(rec)
			if err != nil {
				skipped++
				continue
			}
			if op.seq <= h {
				continue
			}
			if err := replayThreadRows(tx, op.rows); err != nil {
				return fmt.Errorf("apply journal record %d: %w", op.seq, err)
			}
			last = max(last, op.seq)
			applied++
		}
		if (applied > 0 || skipped > 0) && logReplay != nil {
			logReplay(applied, skipped)
		}
		if last == h {
			return nil
		}
		return tx.Bucket([]byte("meta")).Put(journalHorizon, storage.U64(last))
	})
	if err != nil {
		return fmt.Errorf("apply the journal: %w", err)
	}
	j, err := storage.OpenJournal(dir)
	if err != nil {
		return err
	}
	s.pend = &pendingWrites{j: j, next: last + 1, byThread: map[string][]*wbOp{}, owner: map[string]string{}, kick: make(chan struct{}, 1)}
	s.w.Prepare = s.pend.prepare
	return nil
}
