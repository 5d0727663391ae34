package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// pgSeq is a checkpoint number as the bigint column holds it (numbers past
// it are bounds, never stored: the thread's Seq counts checkpoints).
func pgSeq(seq uint64) int64 {
	if seq > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(seq)
}

func (t *pgTx) GetCheckpoint(thread string, seq uint64) (*Checkpoint, error) {
	if _, err := pgUUID(thread); err != nil {
		return nil, err
	}
	raw, err := t.body("get checkpoint", "select body from checkpoints where thread_id = $1 and seq = $2", thread, pgSeq(seq))
	if err != nil {
		return nil, err
	}
	checkpointRowsRead.Add(1)
	var cp Checkpoint
	if err := unmarshalStored(raw, &cp); err != nil {
		return nil, fmt.Errorf("decode checkpoint: %w", err)
	}
	return &cp, nil
}

func (t *pgTx) CheckpointRefAt(thread string, seq uint64) (*CheckpointRef, error) {
	cp, err := t.GetCheckpoint(thread, seq)
	if err != nil {
		return nil, err
	}
	return &cp.Checkpoint, nil
}

// checkpoints walks the thread's checkpoints numbered in (after, below),
// in order (newest first with desc), a batch per query, while fn returns
// true and no error.
func (t *pgTx) checkpoints(thread string, after, below int64, desc bool, fn func(seq int64, cp *Checkpoint) (bool, error)) error {
	if _, err := pgUUID(thread); err != nil {
		return err
	}
	for {
		order := "seq"
		if desc {
			order = "seq desc"
		}
		seqs, raws, err := t.seqRows(thread, after, below, order)
		if err != nil {
			return err
		}
		var last int64
		for i, raw := range raws {
			var cp Checkpoint
			checkpointRowsRead.Add(1)
			if err := unmarshalStored(raw, &cp); err != nil {
				return fmt.Errorf("decode checkpoint: %w", err)
			}
			last = seqs[i]
			more, err := fn(last, &cp)
			if err != nil || !more {
				return err
			}
		}
		if len(raws) < pgBatch {
			return nil
		}
		if desc {
			below = last
		} else {
			after = last
		}
	}
}

// seqRows reads a batch of the thread's checkpoints numbered in (after,
// below) in order ("seq" or "seq desc").
func (t *pgTx) seqRows(thread string, after, below int64, order string) ([]int64, [][]byte, error) {
	if t.err != nil {
		return nil, nil, t.err
	}
	rows, err := t.tx.Query(t.ctx, "select seq, body from checkpoints where thread_id = $1 and seq > $2 and seq < $3 order by "+
		order+" limit $4", thread, after, below, pgBatch)
	if err != nil {
		return nil, nil, t.fail("read checkpoints", err)
	}
	defer rows.Close()
	var seqs []int64
	var raws [][]byte
	for rows.Next() {
		var seq int64
		var raw []byte
		if err := rows.Scan(&seq, &raw); err != nil {
			return nil, nil, t.fail("read checkpoints", err)
		}
		seqs, raws = append(seqs, seq), append(raws, raw)
	}
	return seqs, raws, t.fail("read checkpoints", rows.Err())
}

func (t *pgTx) ForEachCheckpoint(thread string, fn func(uint64, *Checkpoint) error) error {
	return t.checkpoints(thread, -1, math.MaxInt64, false, func(seq int64, cp *Checkpoint) (bool, error) {
		return true, fn(uint64(seq), cp)
	})
}

func (t *pgTx) CheckpointsNewestFirst(thread string, fn func(*Checkpoint) (bool, error)) error {
	return t.checkpoints(thread, -1, math.MaxInt64, true, func(_ int64, cp *Checkpoint) (bool, error) { return fn(cp) })
}

// checkpointSeq finds the number of the thread's checkpoint id by its
// index (the bbolt store's search; the newest when ids repeat).
func (t *pgTx) checkpointSeq(thread, id string) (int64, bool, error) {
	if _, err := pgUUID(thread); err != nil {
		return 0, false, nil
	}
	var seq int64
	err := t.one("find checkpoint", "select seq from checkpoints where thread_id = $1 and checkpoint_id = $2 order by seq desc limit 1",
		[]any{thread, id}, &seq)
	if errors.Is(err, ErrNotFound) {
		return 0, false, nil
	}
	return seq, err == nil, err
}

func (t *pgTx) CheckpointsBefore(thread, before string, fn func(*Checkpoint) (bool, error)) error {
	seq, ok, err := t.checkpointSeq(thread, before)
	if err != nil || !ok {
		return err
	}
	return t.checkpoints(thread, -1, seq, true, func(_ int64, cp *Checkpoint) (bool, error) { return fn(cp) })
}

func (t *pgTx) CheckpointByID(thread, id string) (*Checkpoint, error) {
	seq, ok, err := t.checkpointSeq(thread, id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: checkpoint %s", ErrNotFound, id)
	}
	return t.GetCheckpoint(thread, uint64(seq))
}

func (t *pgTx) PutCheckpoint(thread string, seq uint64, cp *Checkpoint) error {
	if err := t.unconfined(); err != nil {
		return err
	}
	raw, err := json.Marshal(cp)
	if err != nil {
		return fmt.Errorf("put checkpoint: %w", err)
	}
	return t.exec("put checkpoint", `insert into checkpoints (thread_id, seq, checkpoint_id, body) values ($1, $2, $3, $4)
		on conflict (thread_id, seq) do update set checkpoint_id = excluded.checkpoint_id, body = excluded.body`,
		thread, pgSeq(seq), cp.Checkpoint.CheckpointID, raw)
}

func (t *pgTx) DeleteCheckpointsBefore(thread string, seq uint64) error {
	if err := t.unconfined(); err != nil {
		return err
	}
	return t.exec("delete checkpoints", "delete from checkpoints where thread_id = $1 and seq < $2", thread, pgSeq(seq))
}

func (t *pgTx) DeleteThreadCheckpoints(thread string) error {
	if err := t.unconfined(); err != nil {
		return err
	}
	return t.exec("delete checkpoints", "delete from checkpoints where thread_id = $1", thread)
}

// Checkpoint rows (the lg bucket): keys compare bytewise, as bbolt's.

// lgRange is the condition on k for the rows under prefix.
func lgRange(prefix []byte) (string, []any) {
	if len(prefix) == 0 {
		return "true", nil
	}
	if end := prefixEnd(prefix); end != nil {
		return "k >= $1 and k < $2", []any{prefix, end}
	}
	return "k >= $1", []any{prefix}
}

// lgRows walks the checkpoint rows under prefix (and, going back, below
// below) a batch per query, while fn returns true.
func (t *pgTx) lgRows(prefix, below []byte, desc bool, fn func(k, v []byte) bool) error {
	return t.keyRows("lg_rows", "v", prefix, below, desc, func(k, v []byte) bool {
		lgRowsVisited.Add(1)
		return fn(k, v)
	})
}

// keyRows walks the rows of a table keyed by bytea k whose key has prefix
// (and, going back, is below below), a batch per query, with column val,
// while fn returns true.
func (t *pgTx) keyRows(table, val string, prefix, below []byte, desc bool, fn func(k, v []byte) bool) error {
	cond, args := lgRange(prefix)
	var from []byte // the keyset: past the last row handed out
	for {
		sql, a := cond, append([]any{}, args...)
		switch {
		case desc && from != nil:
			a = append(a, from)
			sql += fmt.Sprintf(" and k < $%d", len(a))
		case desc && below != nil:
			a = append(a, below)
			sql += fmt.Sprintf(" and k < $%d", len(a))
		case from != nil:
			a = append(a, from)
			sql += fmt.Sprintf(" and k > $%d", len(a))
		}
		order := "k"
		if desc {
			order = "k desc"
		}
		if t.err != nil {
			return t.err
		}
		rows, err := t.tx.Query(t.ctx, "select k, "+val+" from "+table+" where "+sql+" order by "+order+fmt.Sprintf(" limit %d", pgBatch), a...)
		if err != nil {
			return t.fail("read "+table, err)
		}
		var ks, vs [][]byte
		for rows.Next() {
			var k, v []byte
			if err := rows.Scan(&k, &v); err != nil {
				rows.Close()
				return t.fail("read "+table, err)
			}
			ks, vs = append(ks, k), append(vs, v)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return t.fail("read "+table, err)
		}
		for i := range ks {
			if !fn(ks[i], vs[i]) {
				return nil
			}
		}
		if len(ks) < pgBatch {
			return nil
		}
		from = ks[len(ks)-1]
	}
}

func (t *pgTx) ScanCheckpointRows(prefix []byte, fn func(k, v []byte) bool) error {
	return t.lgRows(prefix, nil, false, fn)
}

func (t *pgTx) PutCheckpointRow(k, v []byte) error {
	if err := t.unconfined(); err != nil {
		return err
	}
	return t.exec("put checkpoint row", "insert into lg_rows (k, v) values ($1, $2) on conflict (k) do update set v = excluded.v", k, v)
}

func (t *pgTx) DeleteCheckpointRow(k []byte) error {
	if err := t.unconfined(); err != nil {
		return err
	}
	return t.exec("delete checkpoint row", "delete from lg_rows where k = $1", k)
}

// applyRow writes one of a host checkpointer's rows by its mode (as
// applyRows does in bbolt).
func (t *pgTx) applyRow(r cpRow) error {
	switch r.mode {
	case rowDelete:
		return t.exec("delete checkpoint row", "delete from lg_rows where k = $1", r.key)
	case rowPutNew:
		return t.exec("put checkpoint row", "insert into lg_rows (k, v) values ($1, $2) on conflict (k) do nothing", r.key, r.val)
	case rowPutChanged:
		var old []byte
		err := t.one("read checkpoint row", "select v from lg_rows where k = $1", []any{r.key}, &old)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		if old != nil {
			prev, err1 := decodeBlob(old)
			next, err2 := decodeBlob(r.val)
			if err1 == nil && err2 == nil && prev.T == next.T && bytes.Equal(prev.B, next.B) {
				return nil
			}
		}
	}
	return t.exec("put checkpoint row", "insert into lg_rows (k, v) values ($1, $2) on conflict (k) do update set v = excluded.v", r.key, r.val)
}

// PutCheckpointRows writes the rows in a unit of work that checks the
// fence there, under row locks rather than SERIALIZABLE: the thread's
// row is updated in place (a write that changes nothing) and the run's
// row is locked FOR SHARE before the fence reads them, so a claim, the
// run's end or the thread's deletion either commits before (and the
// fence sees it) or waits for this write, and a SERIALIZABLE unit that
// deletes the thread after reading it first fails to serialize
// ("concurrent update") and runs again, seeing these rows.
//
// Why not SERIALIZABLE, as the other units of work: a run writes several
// checkpoints, and the keys of recent threads, runs and checkpoint rows
// are adjacent (time-ordered ids), so their index pages are the same few.
// PostgreSQL's serializable reads lock index pages, not keys: every
// checkpoint unit read the pages every admission and claim wrote, and
// under 16 clients most units failed to serialize and ran again (about
// 7 retries per run with API + 2 workers; BENCHMARKS.md, "Slipway on
// PostgreSQL against Aegra").
func (s *pgStore) PutCheckpointRows(ctx context.Context, thread, run string, rows []cpRow) error {
	t, err := s.unit(ctx, pgIsoLocked, false, func(t *pgTx) error {
		if err := t.lockFence(thread, run); err != nil {
			return err
		}
		if err := fence(t, thread, run); err != nil {
			return err
		}
		// Of several workers, only the run's current attempt writes.
		if err := fenceClaim(ctx, t, run); err != nil {
			return err
		}
		for _, r := range rows {
			if err := t.applyRow(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		s.publish(t.events)
	}
	return err
}

// lockFence locks, in a READ COMMITTED unit, the rows the fence reads
// (PutCheckpointRows): the thread's with an update that changes nothing,
// the run's FOR SHARE. A row that is not there is the fence's to judge.
func (t *pgTx) lockFence(thread, run string) error {
	if err := t.exec("lock the thread", "update threads set busy = busy where thread_id = $1", thread); err != nil {
		return err
	}
	if run == "" {
		return nil
	}
	var one int
	err := t.one("lock the run", "select 1 from runs where run_id = $1 for share", []any{run}, &one)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

func (s *pgStore) ViewCheckpointRows(ctx context.Context, _ string, fn func(checkpointRows) error) error {
	return s.View(ctx, func(tx ReadTx) error {
		t := tx.(*pgTx)
		if err := fn(pgRows{t}); err != nil {
			return err
		}
		return t.err
	})
}

// OpenFence and CloseFence have nothing to do: every write checks the
// fence in its unit of work (there is no faster path to open).
func (s *pgStore) OpenFence(string, string) {}
func (s *pgStore) CloseFence(string)        {}

// pgRows reads checkpoint rows in a read unit; a database error is the
// unit's (t.err), returned by ViewCheckpointRows.
type pgRows struct{ t *pgTx }

func (r pgRows) get(k []byte) []byte {
	var v []byte
	if r.t.one("read checkpoint row", "select v from lg_rows where k = $1", []any{k}, &v) != nil {
		return nil
	}
	return v
}

func (r pgRows) scan(prefix []byte, fn func(k, v []byte) bool) {
	_ = r.t.lgRows(prefix, nil, false, fn)
}

func (r pgRows) last(prefix []byte) ([]byte, []byte) {
	var lk, lv []byte
	_ = r.t.lgRows(prefix, nil, true, func(k, v []byte) bool { lk, lv = k, v; return false })
	return lk, lv
}

func (r pgRows) scanBack(prefix, below []byte, fn func(k, v []byte) bool) {
	_ = r.t.lgRows(prefix, below, true, fn)
}
