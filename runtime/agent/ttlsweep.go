package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"slipway/storage"
)

// runTTLSweeper sweeps expired threads every sweep interval (TTLTick in
// tests) until the engine stops.
func (e *Engine) runTTLSweeper() {
	defer e.wg.Done()
	tick := e.TTLTick
	if tick <= 0 {
		tick = e.TTL.SweepInterval
	}
	if tick <= 0 {
		tick = 5 * time.Minute
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
		}
		if n, err := e.SweepTTL(); err != nil {
			e.Log.Error().Err(err).Msg("thread TTL sweep")
		} else if n > 0 {
			e.Log.Info().Int("threads", n).Msg("thread TTL sweep")
		}
	}
}

// SweepTTL applies their strategy to threads whose TTL has run out, at
// most the sweep limit of index entries per call, and returns how many
// threads it deleted or pruned. Each thread is one transaction (through
// updateLG: a run's journaled writes reach bbolt before rows go).
func (e *Engine) SweepTTL() (int, error) {
	now := e.now()
	limit := e.TTL.SweepLimit
	if limit <= 0 {
		limit = 10000
	}
	var due []ttlEntry
	// The TTL index is written only in bbolt commits, never journaled:
	// its scan needs no pending rows (sweepOne's commit applies them).
	err := e.store.ViewCommitted(context.Background(), func(tx ReadTx) error {
		var err error
		due, err = tx.DueTTLEntries(now, limit)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("read the TTL index: %w", err)
	}
	// A thread that cannot be swept (a record that does not decode) is
	// reported and skipped: it must not stop the sweep of the others.
	swept := 0
	var errs []error
	for _, k := range due {
		ok, err := e.sweepOne(k, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("sweep thread %s: %w", k.Thread, err))
			continue
		}
		if ok {
			swept++
		}
	}
	return swept, errors.Join(errs...)
}

// sweepOne handles one due index entry: a stale entry goes, a thread
// updated since its entry was written is re-keyed to its new expiry, a
// busy one waits, and an expired one is deleted or pruned.
func (e *Engine) sweepOne(key ttlEntry, now time.Time) (bool, error) {
	id := key.Thread
	swept := false
	err := e.store.Update(context.Background(), func(tx Tx) error {
		if !tx.HasTTLEntry(key) {
			return nil // handled meanwhile (a patch, a delete)
		}
		if !tx.ThreadExists(id) {
			return tx.DeleteTTLEntry(key) // the thread is gone
		}
		t, err := tx.GetThread(id)
		if err != nil {
			return err
		}
		if t.TTL == nil || ttlEntryOf(t.TTL.Indexed, id) != key {
			return tx.DeleteTTLEntry(key) // its entry is elsewhere
		}
		expiry := t.UpdatedAt.Add(ttlDuration(t.TTL.Minutes))
		if t.TTL.Strategy == TTLKeepLatest && !t.TTL.Pruned.IsZero() && t.TTL.Pruned.Equal(t.UpdatedAt) {
			// Pruned, and not updated since: look again one TTL from now.
			expiry = now.Add(ttlDuration(t.TTL.Minutes))
		}
		if !expiry.After(now) && t.busy() {
			return nil // never swept while busy: due again next sweep
		}
		if expiry.After(now) {
			if err := tx.DeleteTTLEntry(key); err != nil {
				return err
			}
			t.TTL.Indexed = expiry
			if err := tx.PutTTLEntry(ttlEntryOf(expiry, id)); err != nil {
				return err
			}
			return tx.PutThread(t)
		}
		swept = true
		if t.TTL.Strategy == TTLDelete {
			return deleteThreadAll(tx, id)
		}
		if err := keepLatest(tx, t); err != nil {
			return err
		}
		if err := tx.DeleteTTLEntry(key); err != nil {
			return err
		}
		next := now.Add(ttlDuration(t.TTL.Minutes))
		t.TTL.Pruned, t.TTL.Indexed = t.UpdatedAt, next
		if err := tx.PutTTLEntry(ttlEntryOf(next, id)); err != nil {
			return err
		}
		return tx.PutThread(t)
	})
	return swept, err
}

// deleteThreadAll is DeleteThread's transaction: the thread's crons, runs,
// checkpoints and record.
func deleteThreadAll(tx Tx, id string) error {
	if err := deleteCronsOf(tx, "", id); err != nil {
		return err
	}
	return deleteThreadData(tx, id)
}

// PruneThreads applies a strategy to threads now, whatever their TTL
// (POST /threads/prune): "delete" deletes them as DELETE /threads/{id}
// does, "keep_latest" keeps each idle one's latest checkpoints. Unknown
// threads, and busy ones under keep_latest, are skipped; it returns how
// many it pruned.
func (e *Engine) PruneThreads(ids []string, strategy string) (int, error) {
	if strategy != TTLDelete && strategy != TTLKeepLatest {
		return 0, fmt.Errorf("%w: Invalid strategy: %s. Expected 'delete' or 'keep_latest'.", ErrInvalid, strategy)
	}
	n := 0
	for _, id := range ids {
		if strategy == TTLDelete {
			err := e.DeleteThread(id)
			if err == nil {
				n++
			} else if !errors.Is(err, ErrNotFound) {
				return n, fmt.Errorf("prune thread %s: %w", id, err)
			}
			continue
		}
		pruned := false
		err := e.store.Update(context.Background(), func(tx Tx) error {
			t, err := tx.GetThread(id)
			if err != nil || t.busy() {
				return nil
			}
			pruned = true
			return keepLatest(tx, t)
		})
		if err != nil {
			return n, fmt.Errorf("prune thread %s: %w", id, err)
		}
		if pruned {
			n++
		}
	}
	return n, nil
}

// keepLatest deletes every checkpoint of t but its latest: in the
// engine's own store the last of its line, in the language-host store
// the latest of each namespace with the channel values it names and its
// own pending writes; older checkpoints, their writes, and values no
// kept checkpoint names go.
func keepLatest(tx Tx, t *threadRecord) error {
	if err := tx.DeleteCheckpointsBefore(t.ThreadID, t.Seq); err != nil {
		return err
	}
	return keepLatestLG(tx, t.ThreadID)
}

// keepLatestLG is keepLatest in the checkpoint rows (key layout in
// hostcheckpoints.go). Within a namespace the kinds sort b < c < w, so
// one pass finds each namespace's latest checkpoint (its last c key) and
// a second picks what goes.
func keepLatestLG(tx Tx, thread string) error {
	prefix := lgKey(thread, "")
	type latest struct {
		id       string
		versions map[string]string
	}
	keep := map[string]*latest{} // namespace → its latest checkpoint
	var derr error
	err := tx.ScanCheckpointRows(prefix, func(k, v []byte) bool {
		parts := strings.SplitN(string(k[len(prefix):]), "\x00", 3)
		if len(parts) != 3 || parts[1] != lgKindCheckpoint {
			return true
		}
		row, err := decodeCheckpoint(v, false)
		if err != nil {
			derr = fmt.Errorf("decode checkpoint %s: %w", parts[2], err)
			return false
		}
		keep[parts[0]] = &latest{id: parts[2], versions: row.ChannelVersions} // ids ascend: the last wins
		return true
	})
	if err == nil {
		err = derr
	}
	if err != nil {
		return err
	}
	var drop [][]byte
	err = tx.ScanCheckpointRows(prefix, func(k, _ []byte) bool {
		parts := strings.SplitN(string(k[len(prefix):]), "\x00", 4)
		if len(parts) < 3 {
			return true
		}
		l := keep[parts[0]]
		gone := false
		switch parts[1] {
		case lgKindCheckpoint:
			gone = l == nil || parts[2] != l.id
		case lgKindWrite:
			// checkpoint id ‖ 0 ‖ task ‖ 0 ‖ idx: the id is parts[2].
			gone = l == nil || parts[2] != l.id
		case lgKindBlob:
			// channel ‖ 0 ‖ version (a version never holds NUL; the rest is it).
			gone = l == nil || len(parts) != 4 || l.versions[parts[2]] != parts[3]
		}
		if gone {
			drop = append(drop, storage.Copy(k))
		}
		return true
	})
	if err != nil {
		return err
	}
	for _, k := range drop {
		if err := tx.DeleteCheckpointRow(k); err != nil {
			return err
		}
	}
	return nil
}
