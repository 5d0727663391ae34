package agent

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

func (t *pgTx) GetRun(id string) (*runRecord, error) {
	raw, err := t.body("get run", "select body from runs where run_id = $1", id)
	if err != nil {
		return nil, err
	}
	runDecodes.Add(1)
	var r runRecord
	if err := unmarshalStored(raw, &r); err != nil {
		return nil, fmt.Errorf("decode run: %w", err)
	}
	return &r, nil
}

func (t *pgTx) RunNotBefore(id string) (*time.Time, error) {
	raw, err := t.body("get run", "select body from runs where run_id = $1", id)
	if err != nil {
		return nil, err
	}
	var r struct {
		NotBefore *time.Time `json:"not_before"`
	}
	if err := unmarshalStored(raw, &r); err != nil {
		return nil, fmt.Errorf("decode run: %w", err)
	}
	return r.NotBefore, nil
}

func (t *pgTx) ThreadRunIDs(thread string) ([]string, error) {
	if _, err := pgUUID(thread); err != nil {
		return nil, err
	}
	return t.strs("thread's runs", "select r.run_id::text from thread_runs r where r.thread_id = $1 order by r.run_id", thread)
}

func (t *pgTx) EachThreadRunNewest(thread string, fn func(*runRecord) bool) error {
	if _, err := pgUUID(thread); err != nil {
		return err
	}
	// A batch at a time, newest first; an indexed run whose record is
	// gone is skipped (as on bbolt).
	below := "ffffffff-ffff-ffff-ffff-ffffffffffff"
	for {
		ids, raws, err := t.pairs("thread's runs", `select i.run_id::text, r.body from thread_runs i
			left join runs r on r.run_id = i.run_id::text
			where i.thread_id = $1 and i.run_id < $2 order by i.run_id desc limit $3`, thread, below, pgBatch)
		if err != nil {
			return err
		}
		for _, raw := range raws {
			if raw == nil {
				continue
			}
			var r runRecord
			runDecodes.Add(1)
			if unmarshalStored(raw, &r) != nil {
				continue
			}
			if !fn(&r) {
				return nil
			}
		}
		if len(ids) < pgBatch {
			return nil
		}
		below = ids[len(ids)-1]
	}
}

func (t *pgTx) PutRun(r *runRecord) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("put run: %w", err)
	}
	if err := t.exec("put run", `insert into runs (run_id, thread_id, body) values ($1, $2, $3)
		on conflict (run_id) do update set thread_id = excluded.thread_id, body = excluded.body`, r.RunID, r.ThreadID, raw); err != nil {
		return err
	}
	t.note(storeEvent{Kind: eventRunChanged, Thread: r.ThreadID, Run: r.RunID, Status: r.Status})
	return nil
}

func (t *pgTx) IndexRun(thread, run string) error {
	if err := t.exec("index run", "insert into thread_runs (thread_id, run_id) values ($1, $2) on conflict do nothing", thread, run); err != nil {
		return err
	}
	t.note(storeEvent{Kind: eventRunQueued, Thread: thread, Run: run})
	return nil
}

func (t *pgTx) DeleteRun(thread, run string) error {
	if err := t.exec("delete run", "delete from thread_runs where thread_id = $1 and run_id = $2", thread, run); err != nil {
		return err
	}
	if err := t.exec("delete run", "delete from runs where run_id = $1", run); err != nil {
		return err
	}
	t.note(storeEvent{Kind: eventRunChanged, Thread: thread, Run: run})
	return nil
}

func (t *pgTx) DeleteThreadRuns(thread string) error {
	ids, err := t.strs("delete thread's runs", "delete from thread_runs where thread_id = $1 returning run_id::text", thread)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	if err := t.exec("delete thread's runs", "delete from runs where run_id = any($1)", ids); err != nil {
		return err
	}
	slices.Sort(ids) // the index's order, as the bbolt store notes them
	for _, run := range ids {
		t.note(storeEvent{Kind: eventRunChanged, Thread: thread, Run: run})
	}
	return nil
}

// ClaimNextRun is boltTx.ClaimNextRun with the thread's row locked (FOR
// UPDATE) first: a concurrent claim on the thread waits for this unit,
// and then fails to serialize and runs again, seeing this claim. (SKIP
// LOCKED belongs to a worker's scan over every thread's queue, which
// this method, one thread's claim, is the step of.)
func (t *pgTx) ClaimNextRun(thread string, c runClaim) (*runRecord, error) {
	var one int
	lock := "select 1 from threads where thread_id = $1 for update"
	if c.SkipLocked {
		lock += " skip locked"
	}
	err := t.one("claim a run", lock, []any{thread}, &one)
	if errors.Is(err, ErrNotFound) {
		if t.locked {
			return nil, errClaimSkipped // nothing read here may be relied on
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	th, err := t.GetThread(thread)
	if err != nil {
		return nil, err
	}
	if run := cmp.Or(th.Active, firstOf(th.Queue)); t.locked && run != "" {
		// The run claimNext reads and may write: its row too is this
		// unit's before it is read (a lease renewal committing meanwhile
		// is seen, not overwritten).
		err := t.one("claim a run", "select 1 from runs where run_id = $1 for update", []any{run}, &one)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
	}
	return claimNext(t, th, c)
}

// firstOf is ids[0], or "" for none.
func firstOf(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return ids[0]
}

func (t *pgTx) RenewLease(run, worker string, until time.Time) error {
	return renewLease(t, run, worker, until)
}
