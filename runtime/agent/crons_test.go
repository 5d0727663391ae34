package agent

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"slipway/storage"
)

func TestNextCronDate(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		name, schedule, tz, after, want string
		invalid                         bool
	}{
		{name: "every five minutes", schedule: "*/5 * * * *", after: "2026-01-15T10:01:30Z", want: "2026-01-15T10:05:00Z"},
		{name: "strictly after", schedule: "*/5 * * * *", after: "2026-01-15T10:05:00Z", want: "2026-01-15T10:10:00Z"},
		{name: "daily UTC", schedule: "0 9 * * *", after: "2026-01-15T12:00:00Z", want: "2026-01-16T09:00:00Z"},
		{name: "daily New York winter", schedule: "0 9 * * *", tz: "America/New_York", after: "2026-01-15T12:00:00Z", want: "2026-01-15T14:00:00Z"},
		{name: "daily New York summer", schedule: "0 9 * * *", tz: "America/New_York", after: "2026-07-15T12:00:00Z", want: "2026-07-15T13:00:00Z"},
		{name: "weekday list", schedule: "30 8 * * 1-5", after: "2026-01-17T00:00:00Z", want: "2026-01-19T08:30:00Z"},
		{name: "descriptor", schedule: "@hourly", after: "2026-01-15T10:20:00Z", want: "2026-01-15T11:00:00Z"},
		{name: "six fields", schedule: "0 */5 * * * *", invalid: true},
		{name: "garbage", schedule: "every minute", invalid: true},
		{name: "zone in schedule", schedule: "CRON_TZ=Asia/Tokyo 0 9 * * *", invalid: true},
		{name: "unknown zone", schedule: "* * * * *", tz: "Mars/Olympus", invalid: true},
		{name: "never", schedule: "0 0 30 2 *", invalid: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			after := time.Now()
			if c.after != "" {
				after = at(c.after)
			}
			got, err := NextCronDate(c.schedule, c.tz, after)
			if c.invalid {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("want ErrInvalid, got %v %v", got, err)
				}
				return
			}
			if err != nil || !got.Equal(at(c.want)) || got.Location() != time.UTC {
				t.Fatalf("got %v %v, want %s", got, err, c.want)
			}
		})
	}
}

// fakeClock is a settable engine clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Set(s string) {
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	c.mu.Lock()
	c.t = v
	c.mu.Unlock()
}

// cronEngine is an engine on a fresh database whose scheduler never
// ticks by itself: the tests fire crons with FireDueCrons on a fake clock.
func cronEngine(t *testing.T) (*Engine, *fakeClock) {
	t.Helper()
	return clockEngine(t, "2026-01-15T10:01:00Z", TTLConfig{})
}

// clockEngine is an engine on a fresh database and a fake clock set to
// start, whose cron scheduler and TTL sweeper never tick by themselves.
func clockEngine(t *testing.T, start string, cfg TTLConfig) (*Engine, *fakeClock) {
	t.Helper()
	return clockEngineWith(t, start, cfg, nil)
}

// clockEngineWith is clockEngine on store (nil: a bbolt file).
func clockEngineWith(t *testing.T, start string, cfg TTLConfig, store Store) (*Engine, *fakeClock) {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "agent.db"), time.Second, Migrations)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	clk := &fakeClock{}
	clk.Set(start)
	e := &Engine{DB: db, Store: store, Graphs: map[string]Graph{"echo": Echo{}}, Workers: 2, Timeout: time.Minute,
		Log: zerolog.Nop(), Clock: clk.Now, CronTick: time.Hour, TTLTick: time.Hour, TTL: cfg}
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return e, clk
}

// TestCronFiring drives crons through a fake clock: a cron fires once at
// each date that comes, once for all the dates it missed, and never when
// disabled, deleted, or past its end time; an update recomputes its next
// date.
func TestCronFiring(t *testing.T) { testCronFiring(t, cronEngine) }

func testCronFiring(t *testing.T, start func(*testing.T) (*Engine, *fakeClock)) {
	type step struct {
		at    string
		do    func(e *Engine, c Cron) // before firing
		fires int
		next  string // the cron's next_run_date after the step ("" when deleted)
	}
	end := time.Date(2026, 1, 15, 10, 7, 0, 0, time.UTC)
	for _, c := range []struct {
		name  string
		cc    CronCreate
		steps []step
	}{
		{name: "fires at each date once", cc: CronCreate{Schedule: "*/5 * * * *", Enabled: true}, steps: []step{
			{at: "2026-01-15T10:04:59Z", fires: 0, next: "2026-01-15T10:05:00Z"},
			{at: "2026-01-15T10:05:00Z", fires: 1, next: "2026-01-15T10:10:00Z"},
			{at: "2026-01-15T10:05:30Z", fires: 0, next: "2026-01-15T10:10:00Z"},
			{at: "2026-01-15T10:10:01Z", fires: 1, next: "2026-01-15T10:15:00Z"},
		}},
		{name: "missed dates fire once", cc: CronCreate{Schedule: "*/5 * * * *", Enabled: true}, steps: []step{
			{at: "2026-01-15T11:02:00Z", fires: 1, next: "2026-01-15T11:05:00Z"},
			{at: "2026-01-15T11:02:00Z", fires: 0, next: "2026-01-15T11:05:00Z"},
		}},
		{name: "end time", cc: CronCreate{Schedule: "*/5 * * * *", Enabled: true, EndTime: &end}, steps: []step{
			{at: "2026-01-15T10:05:00Z", fires: 1, next: "2026-01-15T10:10:00Z"},
			{at: "2026-01-15T10:10:00Z", fires: 0, next: "2026-01-15T10:10:00Z"},
		}},
		{name: "disabled, then enabled", cc: CronCreate{Schedule: "*/5 * * * *", Enabled: false}, steps: []step{
			{at: "2026-01-15T10:05:00Z", fires: 0, next: "2026-01-15T10:05:00Z"},
			{at: "2026-01-15T10:06:00Z", do: func(e *Engine, c Cron) {
				on := true
				if _, err := e.UpdateCron(c.CronID, CronPatch{Enabled: &on}); err != nil {
					panic(err)
				}
			}, fires: 1, next: "2026-01-15T10:10:00Z"},
		}},
		{name: "schedule update", cc: CronCreate{Schedule: "*/5 * * * *", Enabled: true}, steps: []step{
			{at: "2026-01-15T10:02:00Z", do: func(e *Engine, c Cron) {
				s := "0 12 * * *"
				if _, err := e.UpdateCron(c.CronID, CronPatch{Schedule: &s}); err != nil {
					panic(err)
				}
			}, fires: 0, next: "2026-01-15T12:00:00Z"},
			{at: "2026-01-15T10:05:00Z", fires: 0, next: "2026-01-15T12:00:00Z"},
			{at: "2026-01-15T12:00:00Z", fires: 1, next: "2026-01-16T12:00:00Z"},
		}},
		{name: "deleted", cc: CronCreate{Schedule: "*/5 * * * *", Enabled: true}, steps: []step{
			{at: "2026-01-15T10:05:00Z", do: func(e *Engine, c Cron) {
				if err := e.DeleteCron(c.CronID); err != nil {
					panic(err)
				}
			}, fires: 0},
		}},
		{name: "time zone", cc: CronCreate{Schedule: "0 9 * * *", Timezone: "America/New_York", Enabled: true}, steps: []step{
			{at: "2026-01-15T13:59:00Z", fires: 0, next: "2026-01-15T14:00:00Z"},
			{at: "2026-01-15T14:00:00Z", fires: 1, next: "2026-01-16T14:00:00Z"},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, clk := start(t)
			th, err := e.CreateThread("", nil, "")
			if err != nil {
				t.Fatal(err)
			}
			c.cc.ThreadID = th.ThreadID
			c.cc.Payload = map[string]any{"assistant_id": "echo", "input": map[string]any{"messages": []any{}}}
			cr, err := e.CreateCron(c.cc)
			if err != nil {
				t.Fatal(err)
			}
			total := 0
			for i, s := range c.steps {
				clk.Set(s.at)
				if s.do != nil {
					s.do(e, cr)
				}
				if n := e.FireDueCrons(); n != s.fires {
					t.Fatalf("step %d (%s): fired %d, want %d", i, s.at, n, s.fires)
				}
				total += s.fires
				got, err := e.GetCron(cr.CronID)
				if s.next == "" {
					if !errors.Is(err, ErrNotFound) {
						t.Fatalf("step %d: deleted cron: %+v %v", i, got, err)
					}
					continue
				}
				if err != nil || got.NextRunDate.Format(time.RFC3339) != s.next {
					t.Fatalf("step %d: next_run_date %v %v, want %s", i, got.NextRunDate, err, s.next)
				}
			}
			runs, err := e.ListRuns(th.ThreadID, 100, 0, "")
			if err != nil || len(runs) != total {
				t.Fatalf("thread has %d runs (%v), want %d", len(runs), err, total)
			}
			for _, r := range runs {
				if _, err := e.Join(t.Context(), th.ThreadID, r.RunID); err != nil {
					t.Fatalf("join %s: %v", r.RunID, err)
				}
				if cfg, _ := r.Kwargs["config"].(map[string]any); cfg["configurable"].(map[string]any)["cron_id"] != cr.CronID {
					t.Fatalf("run's config lacks the cron id: %v", r.Kwargs)
				}
			}
		})
	}
}

// TestStatelessCron: each fire of a stateless cron runs on a new thread,
// deleted after the run (on_run_completed delete, the default) or kept.
func TestStatelessCron(t *testing.T) { testStatelessCron(t, cronEngine) }

func testStatelessCron(t *testing.T, start func(*testing.T) (*Engine, *fakeClock)) {
	for _, c := range []struct {
		orc     string
		threads int
	}{{"", 0}, {"delete", 0}, {"keep", 2}} {
		t.Run("on_run_completed="+c.orc, func(t *testing.T) {
			e, clk := start(t)
			cr, err := e.CreateCron(CronCreate{Schedule: "*/5 * * * *", Enabled: true, OnRunCompleted: c.orc,
				Payload: map[string]any{"assistant_id": "echo", "input": map[string]any{"messages": []any{}}}})
			if err != nil {
				t.Fatal(err)
			}
			if cr.ThreadID != nil || cr.OnRunCompleted == nil || *cr.OnRunCompleted != cmpOr(c.orc, "delete") {
				t.Fatalf("created: %+v", cr)
			}
			for _, at := range []string{"2026-01-15T10:05:00Z", "2026-01-15T10:10:00Z"} {
				clk.Set(at)
				if n := e.FireDueCrons(); n != 1 {
					t.Fatalf("%s: fired %d", at, n)
				}
			}
			// Every run has ended when its thread is idle or gone.
			deadline := time.Now().Add(30 * time.Second)
			for {
				ts, _, err := e.SearchThreads(ThreadFilter{})
				if err != nil {
					t.Fatal(err)
				}
				busy := 0
				for _, th := range ts {
					if th.Status == ThreadBusy {
						busy++
					}
				}
				if busy == 0 && len(ts) == c.threads {
					for _, th := range ts {
						if th.Metadata["graph_id"] != "echo" {
							t.Fatalf("kept thread: %+v", th)
						}
					}
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("threads: %d (busy %d), want %d idle", len(ts), busy, c.threads)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestCronSearch: filters, sort orders, paging and count.
func TestCronSearch(t *testing.T) { testCronSearch(t, cronEngine) }

func testCronSearch(t *testing.T, start func(*testing.T) (*Engine, *fakeClock)) {
	e, clk := start(t)
	th, err := e.CreateThread("", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i, cc := range []CronCreate{
		{Schedule: "0 * * * *", Enabled: true, Metadata: map[string]any{"k": "a"}},
		{Schedule: "*/5 * * * *", Enabled: false, ThreadID: th.ThreadID},
		{Schedule: "30 * * * *", Enabled: true, Metadata: map[string]any{"k": "b"}},
	} {
		clk.Set(time.Date(2026, 1, 15, 10, 1, i, 0, time.UTC).Format(time.RFC3339))
		cc.Payload = map[string]any{"assistant_id": "echo"}
		c, err := e.CreateCron(cc)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.CronID)
	}
	on := true
	for _, c := range []struct {
		name string
		f    CronFilter
		want []int
		n    int
	}{
		{name: "newest first", f: CronFilter{}, want: []int{2, 1, 0}, n: 3},
		{name: "created_at asc", f: CronFilter{SortBy: "created_at"}, want: []int{0, 1, 2}, n: 3},
		{name: "next_run_date asc", f: CronFilter{SortBy: "next_run_date"}, want: []int{1, 2, 0}, n: 3},
		{name: "next_run_date desc", f: CronFilter{SortBy: "next_run_date", Desc: true}, want: []int{0, 2, 1}, n: 3},
		{name: "thread", f: CronFilter{ThreadID: th.ThreadID}, want: []int{1}, n: 1},
		{name: "enabled", f: CronFilter{Enabled: &on, SortBy: "created_at"}, want: []int{0, 2}, n: 2},
		{name: "metadata", f: CronFilter{Metadata: map[string]any{"k": "b"}}, want: []int{2}, n: 1},
		{name: "assistant", f: CronFilter{AssistantID: AssistantID("echo"), Limit: 1, Offset: 1}, want: []int{1}, n: 3},
		{name: "other assistant", f: CronFilter{AssistantID: AssistantID("nope")}, want: nil, n: 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			list, n, err := e.SearchCrons(c.f)
			if err != nil || n != c.n || len(list) != len(c.want) {
				t.Fatalf("got %d of %d (%v), want %v of %d", len(list), n, err, c.want, c.n)
			}
			for i, w := range c.want {
				if list[i].CronID != ids[w] {
					t.Fatalf("position %d: %s, want cron %d", i, list[i].CronID, w)
				}
			}
		})
	}
}

// TestMigrateCrons opens a database written at schema 3 (before crons)
// with every migration: the crons bucket is created and crons work.
func TestMigrateCrons(t *testing.T) {
	db := migratedFrom(t, 3)
	e := &Engine{DB: db, Graphs: map[string]Graph{"echo": Echo{}}, Workers: 1, Timeout: time.Minute, Log: zerolog.Nop(), CronTick: time.Hour}
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	c, err := e.CreateCron(CronCreate{Schedule: "@daily", Enabled: true, Payload: map[string]any{"assistant_id": "echo"}})
	if err != nil {
		t.Fatal(err)
	}
	if list, n, err := e.SearchCrons(CronFilter{}); err != nil || n != 1 || list[0].CronID != c.CronID {
		t.Fatalf("after migration: %v %d %v", list, n, err)
	}
}

// TestCronsGoWithTheirThreadOrAssistant: deleting a thread deletes its
// crons, deleting an assistant deletes the crons that run it, as on the
// reference; other crons stay.
func TestCronsGoWithTheirThreadOrAssistant(t *testing.T) {
	testCronsGoWithTheirThreadOrAssistant(t, cronEngine)
}

func testCronsGoWithTheirThreadOrAssistant(t *testing.T, start func(*testing.T) (*Engine, *fakeClock)) {
	e, _ := start(t)
	a, err := e.CreateAssistant(Assistant{GraphID: "echo"}, "")
	if err != nil {
		t.Fatal(err)
	}
	th, err := e.CreateThread("", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	mk := func(cc CronCreate, assistant string) string {
		t.Helper()
		cc.Schedule, cc.Enabled, cc.Payload = "@daily", true, map[string]any{"assistant_id": assistant}
		c, err := e.CreateCron(cc)
		if err != nil {
			t.Fatal(err)
		}
		return c.CronID
	}
	onThread := mk(CronCreate{ThreadID: th.ThreadID}, "echo")
	ofAssistant := mk(CronCreate{}, a.AssistantID)
	other := mk(CronCreate{}, "echo")
	if err := e.DeleteThread(th.ThreadID); err != nil {
		t.Fatal(err)
	}
	if err := e.DeleteAssistant(a.AssistantID); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{onThread: false, ofAssistant: false, other: true} {
		if _, err := e.GetCron(id); (err == nil) != want {
			t.Fatalf("cron %s: %v, want kept=%v", id, err, want)
		}
	}
}
