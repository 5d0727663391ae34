package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"slipway/storage"
)

// runCrons fires due crons every CronTick until the engine stops.
func (e *Engine) runCrons() {
	defer e.wg.Done()
	tick := e.CronTick
	if tick <= 0 {
		tick = time.Second
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		e.FireDueCrons()
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// FireDueCrons starts a run for every enabled cron whose next run date
// has come (and whose end time has not passed), and returns how many it
// started. Each firing is one transaction: the run is admitted (queued
// for the dispatcher) and the cron's next run date advanced together, so
// a crash can neither lose the fire nor repeat it. The next date is the
// schedule's first time after now: a cron whose dates passed while the
// agent was down fires once, not once per missed date.
//
// Crons are written only in bbolt commits, never journaled (store_writebehind.go):
// their reads need no pending rows.
func (e *Engine) FireDueCrons() int {
	now := e.now()
	var due []string
	_ = e.store.ViewCommitted(context.Background(), func(tx ReadTx) error {
		return tx.ForEachCron(func(c *Cron, err error) error {
			if err == nil && cronDue(c, now) {
				due = append(due, c.CronID)
			}
			return nil
		})
	})
	fired := 0
	for _, id := range due {
		if e.fireCron(id, now) {
			fired++
		}
	}
	return fired
}

func cronDue(c *Cron, now time.Time) bool {
	return c.Enabled && !c.NextRunDate.After(now) && (c.EndTime == nil || !c.EndTime.Before(now))
}

// fireCron fires one cron if it is still due (it may have been updated or
// deleted since FireDueCrons looked).
func (e *Engine) fireCron(id string, now time.Time) bool {
	var (
		ad       admission
		threadID string
		c        *Cron
		prepared []string
	)
	err := e.store.Update(context.Background(), func(tx Tx) error {
		var err error
		if c, err = getCron(tx, id); err != nil || !cronDue(c, now) {
			c = nil
			return nil
		}
		if err := e.advanceCron(tx, c, now); err != nil {
			return err
		}
		rc, temporary, err := cronRun(c)
		if err != nil {
			return err
		}
		threadID = rc.threadID
		if ad, err = e.admit(tx, threadID, rc.RunCreate, temporary, false); err != nil {
			return err
		}
		// The run's event log exists before the commit: once committed,
		// a dispatcher already working through the thread's queue may
		// claim and finish it at once, and a log created after that
		// would never be closed (a join would wait forever).
		if !e.distributed() {
			prepared = append(prepared, ad.run.RunID)
			e.prepareEvents(ad.run.RunID)
		}
		return nil
	})
	e.dropUncommitted(prepared, ad.run.RunID, err)
	if err != nil {
		// The run could not be admitted (its thread or assistant is
		// gone, a reject strategy on a busy thread): this date is
		// skipped, so a broken cron does not retry every tick.
		e.Log.Warn().Err(err).Str("cron_id", id).Msg("cron run not started")
		_ = e.store.Update(context.Background(), func(tx Tx) error {
			c, err := getCron(tx, id)
			if err != nil || !cronDue(c, now) {
				return nil
			}
			return e.advanceCron(tx, c, now)
		})
		return false
	}
	if c == nil {
		return false
	}
	e.settle(threadID, ad)
	e.Log.Info().Str("cron_id", id).Str("run_id", ad.run.RunID).Str("thread_id", threadID).Msg("cron fired")
	return true
}

// advanceCron sets the cron's next run date to the schedule's first time
// after now, in tx.
func (e *Engine) advanceCron(tx Tx, c *Cron, now time.Time) error {
	tz := ""
	if c.Timezone != nil {
		tz = *c.Timezone
	}
	next, err := NextCronDate(c.Schedule, tz, now)
	if err != nil {
		return err
	}
	c.NextRunDate = next
	return tx.PutCron(c)
}

type cronRunCreate struct {
	RunCreate
	threadID string
}

// cronRun is the run request a cron fires: its payload, on its thread or
// (stateless) on a new thread, deleted after the run unless
// on_run_completed is keep.
func cronRun(c *Cron) (cronRunCreate, bool, error) {
	p := map[string]any{}
	for k, v := range c.Payload {
		p[k] = v
	}
	// A cron's runs are not streamed to anyone.
	delete(p, "stream_mode")
	raw, err := json.Marshal(p)
	if err != nil {
		return cronRunCreate{}, false, err
	}
	var rc RunCreate
	if err := json.Unmarshal(raw, &rc); err != nil {
		return cronRunCreate{}, false, fmt.Errorf("%w: cron %s payload: %v", ErrInvalid, c.CronID, err)
	}
	rc.StreamMode = []string{"values"}
	rc.AssistantID = c.AssistantID
	if c.ThreadID != nil {
		return cronRunCreate{RunCreate: rc, threadID: *c.ThreadID}, false, nil
	}
	temporary := c.OnRunCompleted == nil || *c.OnRunCompleted != "keep"
	if !temporary {
		rc.IfNotExists = "create"
	}
	return cronRunCreate{RunCreate: rc, threadID: storage.NewID().String()}, temporary, nil
}
