package agent

import (
	"context"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata"

	"github.com/robfig/cron/v3"

	"slipway/storage"
)

// Cron is a schedule of runs, shaped as on the reference servers.
type Cron struct {
	CronID         string         `json:"cron_id"`
	AssistantID    string         `json:"assistant_id"`
	ThreadID       *string        `json:"thread_id"`
	UserID         *string        `json:"user_id"`
	EndTime        *time.Time     `json:"end_time"`
	Schedule       string         `json:"schedule"`
	Timezone       *string        `json:"timezone"`
	Payload        map[string]any `json:"payload"`
	NextRunDate    time.Time      `json:"next_run_date"`
	Metadata       map[string]any `json:"metadata"`
	OnRunCompleted *string        `json:"on_run_completed"`
	Enabled        bool           `json:"enabled"`
	CreatedAt      time.Time      `json:"created_at"`
	UpdatedAt      time.Time      `json:"updated_at"`
}

// CronCreate is a cron request, validated by the API. Payload is the
// request body (the run request the cron repeats, as the reference keeps
// it).
type CronCreate struct {
	ThreadID       string
	Schedule       string
	Timezone       string
	EndTime        *time.Time
	Enabled        bool
	OnRunCompleted string
	Metadata       map[string]any
	Payload        map[string]any
}

// CronPatch is a cron update; nil fields are left as they are.
type CronPatch struct {
	Schedule       *string
	Timezone       *string
	EndTime        *time.Time
	ClearEndTime   bool
	Enabled        *bool
	OnRunCompleted *string
	Metadata       map[string]any
	// Payload is merged into the cron's run request (shallowly, as the
	// reference does); its assistant stays.
	Payload map[string]any
}

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// NextCronDate is the first time after `after` that the 5-field schedule
// names, read in the IANA zone tz ("" is UTC), returned in UTC.
func NextCronDate(schedule, tz string, after time.Time) (time.Time, error) {
	loc, err := cronLocation(tz)
	if err != nil {
		return time.Time{}, err
	}
	// robfig's parser would take a zone from a CRON_TZ= prefix; the
	// timezone field is the one way to name a zone here.
	if strings.Contains(schedule, "TZ=") {
		return time.Time{}, invalidSchedule(schedule)
	}
	s, err := cronParser.Parse(schedule)
	if err != nil {
		return time.Time{}, invalidSchedule(schedule)
	}
	next := s.Next(after.In(loc))
	if next.IsZero() {
		return time.Time{}, fmt.Errorf("%w: cron schedule '%s' never fires", ErrInvalid, schedule)
	}
	return next.UTC(), nil
}

func invalidSchedule(schedule string) error {
	return fmt.Errorf("%w: Invalid cron schedule: '%s'. Ensure the schedule uses the standard cron format "+
		"(minute hour day_of_month month day_of_week). Example: '*/5 * * * *' for every 5 minutes.", ErrInvalid, schedule)
}

func cronLocation(tz string) (*time.Location, error) {
	if tz == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(tz)
	if err != nil || tz == "Local" {
		return nil, fmt.Errorf("%w: Invalid timezone: '%s'. Use IANA timezone format (e.g. 'America/New_York').", ErrInvalid, tz)
	}
	return loc, nil
}

// now is the engine's clock (Clock when a test sets it).
func (e *Engine) now() time.Time {
	if e.Clock != nil {
		return e.Clock().UTC()
	}
	return time.Now().UTC()
}

func getCron(tx ReadTx, id string) (*Cron, error) {
	c, err := tx.GetCron(id)
	if err != nil {
		return nil, fmt.Errorf("%w: cron %s", ErrNotFound, id)
	}
	return c, nil
}

// cronPayload sets config.configurable.cron_id in p, as the reference
// does, so the graph can tell which cron started it.
func cronPayload(p map[string]any, id string) map[string]any {
	if p == nil {
		p = map[string]any{}
	}
	cfg, _ := p["config"].(map[string]any)
	if cfg == nil {
		cfg = map[string]any{}
	}
	cf, _ := cfg["configurable"].(map[string]any)
	if cf == nil {
		cf = map[string]any{}
	}
	cf["cron_id"] = id
	cfg["configurable"] = cf
	p["config"] = cfg
	return p
}

// CreateCron stores a cron; its first run is at the schedule's next time.
func (e *Engine) CreateCron(cc CronCreate) (Cron, error) {
	now := e.now()
	next, err := NextCronDate(cc.Schedule, cc.Timezone, now)
	if err != nil {
		return Cron{}, err
	}
	var out Cron
	err = e.store.Update(context.Background(), func(tx Tx) error {
		aid, _ := cc.Payload["assistant_id"].(string)
		a, err := e.ResolveAssistant(tx, aid)
		if err != nil {
			return err
		}
		c := Cron{CronID: storage.NewID().String(), AssistantID: a.AssistantID, Schedule: cc.Schedule,
			EndTime: cc.EndTime, NextRunDate: next, Metadata: cc.Metadata, Enabled: cc.Enabled,
			CreatedAt: now, UpdatedAt: now}
		if c.Metadata == nil {
			c.Metadata = map[string]any{}
		}
		if cc.Timezone != "" {
			c.Timezone = &cc.Timezone
		}
		if cc.ThreadID != "" {
			if !tx.ThreadExists(cc.ThreadID) {
				return fmt.Errorf("%w: thread %s", ErrNotFound, cc.ThreadID)
			}
			c.ThreadID = &cc.ThreadID
		} else {
			orc := cc.OnRunCompleted
			if orc == "" {
				orc = "delete"
			}
			c.OnRunCompleted = &orc
		}
		cc.Payload["assistant_id"] = a.AssistantID
		c.Payload = cronPayload(cc.Payload, c.CronID)
		out = c
		return tx.PutCron(&c)
	})
	return out, err
}

// GetCron returns a cron.
func (e *Engine) GetCron(id string) (Cron, error) {
	var out Cron
	err := e.store.ViewCommitted(context.Background(), func(tx ReadTx) error {
		c, err := getCron(tx, id)
		if err == nil {
			out = *c
		}
		return err
	})
	return out, err
}

// UpdateCron applies p; a new schedule or timezone recomputes the next
// run from now.
func (e *Engine) UpdateCron(id string, p CronPatch) (Cron, error) {
	var out Cron
	err := e.store.Update(context.Background(), func(tx Tx) error {
		c, err := getCron(tx, id)
		if err != nil {
			return err
		}
		now := e.now()
		if p.Timezone != nil {
			if *p.Timezone == "" {
				c.Timezone = nil
			} else {
				c.Timezone = p.Timezone
			}
		}
		if p.Schedule != nil {
			c.Schedule = *p.Schedule
		}
		if p.Schedule != nil || p.Timezone != nil {
			tz := ""
			if c.Timezone != nil {
				tz = *c.Timezone
			}
			if c.NextRunDate, err = NextCronDate(c.Schedule, tz, now); err != nil {
				return err
			}
		}
		switch {
		case p.ClearEndTime:
			c.EndTime = nil
		case p.EndTime != nil:
			c.EndTime = p.EndTime
		}
		if p.Enabled != nil {
			c.Enabled = *p.Enabled
		}
		if p.OnRunCompleted != nil {
			c.OnRunCompleted = p.OnRunCompleted
		}
		if p.Metadata != nil {
			if c.Metadata == nil {
				c.Metadata = map[string]any{}
			}
			for k, v := range p.Metadata {
				c.Metadata[k] = v
			}
		}
		if p.Payload != nil {
			merged := map[string]any{}
			for k, v := range c.Payload {
				merged[k] = v
			}
			for k, v := range p.Payload {
				merged[k] = v
			}
			merged["assistant_id"] = c.Payload["assistant_id"]
			c.Payload = cronPayload(merged, c.CronID)
		}
		c.UpdatedAt = now
		out = *c
		return tx.PutCron(c)
	})
	return out, err
}

// DeleteCron deletes a cron; it fires no more.
func (e *Engine) DeleteCron(id string) error {
	return e.store.Update(context.Background(), func(tx Tx) error {
		if _, err := getCron(tx, id); err != nil {
			return err
		}
		return tx.DeleteCron(id)
	})
}

// deleteCronsOf deletes, in tx, the crons of a thread (thread not "")
// or else of an assistant, found by the cron indexes: as on the
// reference, deleting a thread or an assistant deletes its crons.
func deleteCronsOf(tx Tx, assistant, thread string) error {
	ids, err := tx.CronsOf(assistant, thread)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := tx.DeleteCron(id); err != nil {
			return err
		}
	}
	return nil
}

// CronFilter selects crons.
type CronFilter struct {
	AssistantID string
	ThreadID    string
	Enabled     *bool
	Metadata    map[string]any
	Limit       int
	Offset      int
	SortBy      string
	Desc        bool
}

// CronSortFields are the sort_by values, as on the reference.
var CronSortFields = []string{"cron_id", "assistant_id", "thread_id", "next_run_date", "end_time", "created_at", "updated_at"}

// SearchCrons lists crons matching f (newest first unless f.SortBy); the
// count is the number before paging.
func (e *Engine) SearchCrons(f CronFilter) ([]Cron, int, error) {
	var (
		all []Cron
		n   int
	)
	// Crons are written only in bbolt commits: no journaled rows to flush.
	err := e.store.ViewCommitted(context.Background(), func(tx ReadTx) error {
		var err error
		if all, err = tx.SearchCrons(f); err != nil {
			return err
		}
		n, err = tx.CountCrons(f)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	return all, n, nil
}

// CountCrons counts the crons f selects, from the indexes.
func (e *Engine) CountCrons(f CronFilter) (int, error) {
	var n int
	err := e.store.ViewCommitted(context.Background(), func(tx ReadTx) error {
		var err error
		n, err = tx.CountCrons(f)
		return err
	})
	return n, err
}

// FindCrons returns the page of crons f selects, in its order.
func (e *Engine) FindCrons(f CronFilter) ([]Cron, error) {
	var all []Cron
	err := e.store.ViewCommitted(context.Background(), func(tx ReadTx) error {
		var err error
		all, err = tx.SearchCrons(f)
		return err
	})
	return all, err
}
