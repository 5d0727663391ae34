package audit

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

// clock is a settable time source shared by the log and the forwarder.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

func fwdDB(t *testing.T) (*bolt.DB, *storage.Committer) {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "db"), time.Second, storage.ControlPlaneMigrations)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, &storage.Committer{DB: db}
}

func fwdAppend(t *testing.T, l *Log, w *storage.Committer, org uuid.UUID, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		e := Entry{Op: "create_deployment", OK: true,
			Actor:   Actor{OrgID: org.String(), UserID: uuid.NewString()},
			Request: Request{Method: "POST", Path: "/v2/deployments", ClientIP: "127.0.0.1", Status: 201}}
		if err := w.Update(func(tx *bolt.Tx) error { return l.Append(tx, e) }); err != nil {
			t.Fatal(err)
		}
	}
}

// allEvents returns an organization's stored events (uid → time), in order.
func allEvents(t *testing.T, l *Log, db *bolt.DB, org uuid.UUID) []Mark {
	t.Helper()
	var out []Mark
	_ = db.View(func(tx *bolt.Tx) error {
		page, err := l.Run(tx, Query{Org: org, Start: 0, End: 1 << 62, Limit: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			m, _ := markOf(it)
			out = append(out, m)
		}
		return nil
	})
	return out
}

// receiver records what a webhook gets, failing the first `fail` requests.
type receiver struct {
	mu       sync.Mutex
	fail     int
	requests int
	byOrg    map[string][]Mark
	windows  map[string][]string // X-Slipway-Window-Start per delivery
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.requests++
	if rc.requests <= rc.fail {
		http.Error(w, "not now", http.StatusInternalServerError)
		return
	}
	var items []json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&items); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	org := r.Header.Get("X-Slipway-Organization-Id")
	for _, it := range items {
		m, _ := markOf(it)
		rc.byOrg[org] = append(rc.byOrg[org], m)
	}
	rc.windows[org] = append(rc.windows[org], r.Header.Get("X-Slipway-Window-Start"))
}

func (rc *receiver) got(org uuid.UUID) []Mark {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Mark(nil), rc.byOrg[org.String()]...)
}

func sameMarks(t *testing.T, what string, got, want []Mark) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d events, want %d\ngot  %v\nwant %v", what, len(got), len(want), got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: event %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

// TestForwarderRetriesInOrderAndResumes: windows of two organizations go
// out oldest first, in batches; a failing receiver puts them in back-off,
// and a new forwarder on the same database (a restart) resumes from the
// persisted state without losing or reordering anything.
func TestForwarderRetriesInOrderAndResumes(t *testing.T) {
	db, w := fwdDB(t)
	clk := &clock{t: time.Date(2026, 3, 1, 0, 10, 0, 0, time.UTC)}
	l := &Log{Key: []byte("0123456789abcdef0123456789abcdef"), Version: "test", Now: clk.Now}
	a, b := storage.NewID(), storage.NewID()
	fwdAppend(t, l, w, a, 5) // five events in the same millisecond: batches split inside a time
	clk.Set(clk.Now().Add(10 * time.Minute))
	fwdAppend(t, l, w, b, 2)
	clk.Set(time.Date(2026, 3, 1, 1, 30, 0, 0, time.UTC))
	fwdAppend(t, l, w, a, 2)

	rc := &receiver{fail: 2, byOrg: map[string][]Mark{}, windows: map[string][]string{}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	newF := func() *Forwarder {
		return &Forwarder{Log: l, DB: db, Update: w.Update, URL: srv.URL, Interval: time.Hour,
			Grace: 5 * time.Second, RetryBase: time.Second, RetryMax: 10 * time.Minute, BatchSize: 3, Now: clk.Now}
	}
	ctx := context.Background()

	// 01:00:04: nothing is due yet (grace).
	clk.Set(time.Date(2026, 3, 1, 1, 0, 4, 0, time.UTC))
	f := newF()
	f.RunOnce(ctx)
	if rc.requests != 0 {
		t.Fatalf("%d requests before the first window was due", rc.requests)
	}
	// 02:00:06: windows 00:00 and 01:00 are due; both organizations fail once.
	clk.Set(time.Date(2026, 3, 1, 2, 0, 6, 0, time.UTC))
	next := f.RunOnce(ctx)
	if rc.requests != 2 {
		t.Fatalf("%d requests, want 2 failures", rc.requests)
	}
	if want := clk.Now().Add(time.Second); !next.Equal(want) {
		t.Fatalf("next run %v, want the retry at %v", next, want)
	}
	st, err := f.Status()
	if err != nil || len(st.Organizations) != 2 {
		t.Fatalf("status %+v, %v", st, err)
	}
	for _, o := range st.Organizations {
		if o.Attempts != 1 || o.LastError == "" || o.RetryAt == nil || o.Delivered != 0 || o.PendingWindows < 1 {
			t.Fatalf("status after a failure: %+v", o)
		}
	}
	// Still backing off: nothing is sent.
	f.RunOnce(ctx)
	if rc.requests != 2 {
		t.Fatalf("retried before the back-off: %d requests", rc.requests)
	}
	// A restart after the back-off: a fresh forwarder resumes from the database.
	clk.Set(clk.Now().Add(time.Second))
	f = newF()
	f.RunOnce(ctx)
	sameMarks(t, "org a", rc.got(a), allEvents(t, l, db, a))
	sameMarks(t, "org b", rc.got(b), allEvents(t, l, db, b))
	// a: window 00:00 in two batches (3+2), then window 01:00.
	if wa := rc.windows[a.String()]; len(wa) != 3 || wa[0] != wa[1] || wa[2] <= wa[1] {
		t.Fatalf("org a windows %v", wa)
	}
	st, _ = f.Status()
	for _, o := range st.Organizations {
		if o.Attempts != 0 || o.LastError != "" || o.ForwardedThrough == nil || *o.ForwardedThrough != "2026-03-01T01:59:59.999Z" || o.PendingWindows != 0 {
			t.Fatalf("status after delivery: %+v", o)
		}
	}
	// Nothing new: later runs send nothing, even hours later (empty windows are skipped).
	before := rc.requests
	clk.Set(clk.Now().Add(5 * time.Hour))
	f.RunOnce(ctx)
	if rc.requests != before {
		t.Fatalf("empty windows were sent: %d requests", rc.requests-before)
	}
}

// TestForwarderDeliversLateEvents: an event whose time falls in a window
// already forwarded (its chain's time never decreases, so it can be
// pinned behind the wall clock) goes out with the next window.
func TestForwarderDeliversLateEvents(t *testing.T) {
	db, w := fwdDB(t)
	clk := &clock{t: time.Date(2026, 3, 1, 0, 40, 0, 0, time.UTC)}
	l := &Log{Key: []byte("0123456789abcdef0123456789abcdef"), Version: "test", Now: clk.Now}
	org := storage.NewID()
	fwdAppend(t, l, w, org, 2)
	rc := &receiver{byOrg: map[string][]Mark{}, windows: map[string][]string{}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	f := &Forwarder{Log: l, DB: db, Update: w.Update, URL: srv.URL, Interval: time.Hour, Now: clk.Now}
	clk.Set(time.Date(2026, 3, 1, 1, 0, 6, 0, time.UTC))
	f.RunOnce(context.Background())
	if n := len(rc.got(org)); n != 2 {
		t.Fatalf("%d events after the first window", n)
	}
	// The wall clock steps back; the next event is pinned to the chain's
	// last time, inside the window already delivered.
	clk.Set(time.Date(2026, 3, 1, 0, 20, 0, 0, time.UTC))
	fwdAppend(t, l, w, org, 1)
	events := allEvents(t, l, db, org)
	if events[2].T >= time.Date(2026, 3, 1, 1, 0, 0, 0, time.UTC).UnixMilli() {
		t.Fatalf("setup: the late event is not in the delivered window: %v", events[2])
	}
	clk.Set(time.Date(2026, 3, 1, 3, 0, 6, 0, time.UTC))
	f.RunOnce(context.Background())
	sameMarks(t, "after the late event", rc.got(org), events)
}

// TestForwarderFile appends JSON Lines to a file:// destination.
func TestForwarderFile(t *testing.T) {
	db, w := fwdDB(t)
	clk := &clock{t: time.Date(2026, 3, 1, 0, 40, 0, 0, time.UTC)}
	l := &Log{Key: []byte("0123456789abcdef0123456789abcdef"), Version: "test", Now: clk.Now}
	org := storage.NewID()
	fwdAppend(t, l, w, org, 4)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	f := &Forwarder{Log: l, DB: db, Update: w.Update, URL: "file://" + path, Interval: time.Hour, BatchSize: 3, Now: clk.Now}
	clk.Set(time.Date(2026, 3, 1, 1, 0, 6, 0, time.UTC))
	f.RunOnce(context.Background())
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var got []Mark
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		m, err := markOf(sc.Bytes())
		if err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		got = append(got, m)
	}
	sameMarks(t, "file", got, allEvents(t, l, db, org))
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v", fi.Mode())
	}
}

func TestForwarderBackoff(t *testing.T) {
	f := &Forwarder{RetryBase: time.Second, RetryMax: 10 * time.Minute}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}
	for i, w := range want {
		if got := f.backoff(i + 1); got != w {
			t.Errorf("attempt %d: %v, want %v", i+1, got, w)
		}
	}
	if got := f.backoff(40); got != 10*time.Minute {
		t.Errorf("cap: %v", got)
	}
	// Windows are aligned and due only after the grace.
	f = &Forwarder{Interval: time.Hour, Grace: 5 * time.Second}
	for _, tc := range []struct {
		now  string
		want string
	}{
		{"2026-03-01T02:00:04Z", "2026-03-01T00:59:59.999Z"},
		{"2026-03-01T02:00:05Z", "2026-03-01T01:59:59.999Z"},
		{"2026-03-01T02:59:00Z", "2026-03-01T01:59:59.999Z"},
	} {
		now, _ := time.Parse(time.RFC3339, tc.now)
		if got := fmtMS(f.dueEnd(now)); got != tc.want {
			t.Errorf("due at %s: %s, want %s", tc.now, got, tc.want)
		}
	}
}

func TestRetentionPerOrganization(t *testing.T) {
	db, w := fwdDB(t)
	clk := &clock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := &Log{Key: []byte("0123456789abcdef0123456789abcdef"), Version: "test", Now: clk.Now}
	short, long, def := storage.NewID(), storage.NewID(), storage.NewID()
	for _, org := range []uuid.UUID{short, long, def} {
		fwdAppend(t, l, w, org, 2) // 2025-01-01
	}
	clk.Set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, org := range []uuid.UUID{short, long, def} {
		fwdAppend(t, l, w, org, 1) // 2026-01-01
	}
	clk.Set(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	r := &Retention{Log: l, DB: db, Update: w.Update, Now: clk.Now,
		For: func(_ *bolt.Tx, org uuid.UUID) time.Duration {
			switch org {
			case short:
				return 30 * 24 * time.Hour
			case long:
				return 5000 * 24 * time.Hour // capped at 400 days
			}
			return 0 // the default
		}}
	pruned, err := r.RunOnce()
	if err != nil {
		t.Fatal(err)
	}
	want := map[uuid.UUID]int{short: 3, long: 2, def: 2}
	if fmt.Sprint(pruned) != fmt.Sprint(want) {
		t.Fatalf("pruned %v, want %v", pruned, want)
	}
	_ = db.View(func(tx *bolt.Tx) error {
		if rep := l.Verify(tx); len(rep.Breaks) != 0 || rep.Events != 2 {
			t.Fatalf("after retention: %+v", rep)
		}
		return nil
	})
	// Nothing more to do on a second run.
	if pruned, err := r.RunOnce(); err != nil || len(pruned) != 0 {
		t.Fatalf("second run pruned %v, %v", pruned, err)
	}
	// PruneBefore for one organization only.
	pruned, err = r.PruneBefore(clk.Now(), nil, long)
	if err != nil || pruned[long] != 1 || len(pruned) != 1 {
		t.Fatalf("prune before: %v, %v", pruned, err)
	}
}

// TestRetentionRunsOnItsInterval checks the scheduled job, not just one
// run: it prunes at start, then again on each tick as events age past the
// organization's retention (hourly in production; 20 ms here), and stops
// with its context.
func TestRetentionRunsOnItsInterval(t *testing.T) {
	db, w := fwdDB(t)
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := &Log{Key: []byte("0123456789abcdef0123456789abcdef"), Version: "test", Now: clk.Now}
	org := storage.NewID()
	fwdAppend(t, l, w, org, 1) // day 0
	clk.Set(clk.Now().Add(20 * 24 * time.Hour))
	fwdAppend(t, l, w, org, 1) // day 20
	clk.Set(clk.Now().Add(20 * 24 * time.Hour))
	count := func() int {
		n := 0
		_ = db.View(func(tx *bolt.Tx) error { n = l.Verify(tx).Events; return nil })
		return n
	}
	r := &Retention{Log: l, DB: db, Update: w.Update, Now: clk.Now, Interval: 20 * time.Millisecond,
		For: func(*bolt.Tx, uuid.UUID) time.Duration { return 30 * 24 * time.Hour }}
	ctx, cancel := context.WithCancel(context.Background())
	r.Start(ctx)
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// Day 40: the day-0 event is older than 30 days, the day-20 one is not.
	waitUntil("the start-up run", func() bool { return count() == 1 })
	// Day 60: a later tick prunes the day-20 event without another call.
	clk.Set(clk.Now().Add(20 * 24 * time.Hour))
	waitUntil("a scheduled run", func() bool { return count() == 0 })
	cancel()
	r.Wait()
	_ = db.View(func(tx *bolt.Tx) error {
		if rep := l.Verify(tx); len(rep.Breaks) != 0 {
			t.Fatalf("chain after scheduled pruning: %+v", rep)
		}
		return nil
	})
}
