package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"
)

// The forwarder delivers each organization's audit events, window by
// window, to a webhook (one JSON array POST per window, or per batch of a
// large window) or to a JSON Lines file, at least once and in order.
//
// Windows are aligned to the interval: [k·I, (k+1)·I − 1 ms], and a window
// is due once its end is Grace in the past. What makes delivery lossless is
// not the window bounds but the position cursor: the forwarder keeps, per
// organization, the (time, seq) position of the last event it delivered and
// each delivery reads the events strictly after it, up to the window's end.
// Append gives a new event a time no earlier than its chain's head and the
// next sequence number, so an event committed late — even one whose time
// falls inside a window already delivered — still sorts after the cursor
// and goes out with the next window instead of being lost. Grace only
// makes such stragglers rare.
//
// State (bucket audit_forward, org id → ForwardState) is written after each
// successful delivery and after each failure, through the same committer
// as every other write, so it survives restarts; a crash between a
// delivery and its state write re-delivers that batch (receivers dedupe on
// metadata.uid).

// ForwardState is the forwarder's persisted progress for one organization.
// The retry queue is the run of windows after Through up to the latest due
// window; they are delivered oldest first, and the one at its head carries
// the retry state (Attempts, NextAttempt, LastError).
type ForwardState struct {
	// Through is the inclusive end (epoch ms) of the last window delivered.
	Through int64 `json:"through"`
	// After is the last event delivered; the next delivery starts after it.
	After *Mark `json:"after,omitempty"`
	// Attempts counts failed attempts at the window after Through.
	Attempts int `json:"attempts"`
	// NextAttempt (epoch ms) is when that window is tried again.
	NextAttempt int64  `json:"next_attempt,omitempty"`
	LastError   string `json:"last_error,omitempty"`
	LastAttempt int64  `json:"last_attempt,omitempty"`
	LastSuccess int64  `json:"last_success,omitempty"`
	// Delivered counts events delivered (re-deliveries included); Windows
	// counts windows completed, empty ones excepted.
	Delivered uint64 `json:"delivered"`
	Windows   uint64 `json:"windows"`
}

// Window is a closed range of epoch milliseconds.
type Window struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// Forwarder pushes audit windows to SLIPWAY_AUDIT_FORWARD_URL.
type Forwarder struct {
	Log    *Log
	DB     *bolt.DB
	Update func(func(*bolt.Tx) error) error
	// URL is an http(s) webhook or file:///path; empty disables forwarding.
	URL      string
	Interval time.Duration // window length and cadence; default 1h
	// Grace is how far in the past a window's end must be before it is
	// forwarded; default min(5s, Interval).
	Grace time.Duration
	// RetryBase and RetryMax bound the exponential back-off of a failed
	// window: RetryBase·2^(attempts−1), at most RetryMax (defaults 1s, 10m).
	RetryBase, RetryMax time.Duration
	BatchSize           int // events per delivery, default 1000
	Client              *http.Client
	UserAgent           string
	Logger              zerolog.Logger
	Now                 func() time.Time

	wg      sync.WaitGroup
	mu      sync.Mutex
	lastRun time.Time
	running bool
}

func (f *Forwarder) now() time.Time {
	if f.Now != nil {
		return f.Now().UTC()
	}
	return time.Now().UTC()
}

func (f *Forwarder) interval() int64 {
	if f.Interval <= 0 {
		return time.Hour.Milliseconds()
	}
	return max(f.Interval.Milliseconds(), 1)
}

func (f *Forwarder) grace() time.Duration {
	if f.Grace > 0 {
		return f.Grace
	}
	return min(5*time.Second, time.Duration(f.interval())*time.Millisecond)
}

func (f *Forwarder) backoff(attempts int) time.Duration {
	base, most := f.RetryBase, f.RetryMax
	if base <= 0 {
		base = time.Second
	}
	if most <= 0 {
		most = 10 * time.Minute
	}
	d := base
	for i := 1; i < attempts && d < most; i++ {
		d *= 2
	}
	return min(d, most)
}

func (f *Forwarder) batch() int {
	if f.BatchSize > 0 {
		return f.BatchSize
	}
	return 1000
}

// Enabled reports whether a destination is configured.
func (f *Forwarder) Enabled() bool { return f != nil && f.URL != "" }

// dueEnd is the end of the latest window that may be forwarded at now.
func (f *Forwarder) dueEnd(now time.Time) int64 {
	i := f.interval()
	limit := now.Add(-f.grace()).UnixMilli()
	return floorDiv(limit+1, i)*i - 1
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// Start runs the forwarder until ctx ends (it does nothing when disabled).
func (f *Forwarder) Start(ctx context.Context) {
	if !f.Enabled() {
		return
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			next := f.RunOnce(ctx)
			if ctx.Err() != nil {
				return
			}
			wait := time.Until(next)
			if wait < 10*time.Millisecond {
				wait = 10 * time.Millisecond
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
}

// Wait returns once the loop started by Start has stopped.
func (f *Forwarder) Wait() { f.wg.Wait() }

// RunOnce delivers every organization's due windows (those not waiting on
// a back-off) and returns when it should run next.
func (f *Forwarder) RunOnce(ctx context.Context) time.Time {
	f.mu.Lock()
	f.running = true
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.running, f.lastRun = false, f.now()
		f.mu.Unlock()
	}()
	now := f.now()
	due := f.dueEnd(now)
	next := time.UnixMilli(due + f.interval() + 1).Add(f.grace())
	orgs, err := chainOrgs(f.DB)
	if err != nil {
		f.Logger.Error().Err(err).Msg("audit forwarder: list organizations")
		return now.Add(f.backoff(1))
	}
	for _, org := range orgs {
		if ctx.Err() != nil {
			return next
		}
		retry, err := f.forwardOrg(ctx, org, due)
		if err != nil && ctx.Err() == nil {
			f.Logger.Warn().Err(err).Str("organization_id", org.String()).Time("retry_at", retry).
				Msg("audit forwarder: delivery failed; the window stays queued")
		}
		if !retry.IsZero() && retry.Before(next) {
			next = retry
		}
	}
	return next
}

// forwardOrg delivers one organization's due windows in order. It returns
// the time of its next retry when it stopped on a failure (or is waiting
// for one), else the zero time.
func (f *Forwarder) forwardOrg(ctx context.Context, org uuid.UUID, due int64) (time.Time, error) {
	st, err := f.state(org)
	if err != nil {
		return f.now().Add(f.backoff(1)), err
	}
	if st.NextAttempt > 0 && f.now().UnixMilli() < st.NextAttempt {
		return time.UnixMilli(st.NextAttempt), nil
	}
	i := f.interval()
	for st.Through < due && ctx.Err() == nil {
		w := Window{From: st.Through + 1, To: min(floorDiv(st.Through+1, i)*i+i-1, due)}
		wr, err := f.readWindow(org, st.After, w, due)
		if err != nil {
			return f.failed(org, &st, w, err)
		}
		items, last, more := wr.items, wr.last, wr.more
		if wr.skipTo >= 0 {
			st.Through = wr.skipTo
			if err := f.save(org, &st); err != nil {
				return f.now().Add(f.backoff(1)), err
			}
			continue
		}
		st.LastAttempt = f.now().UnixMilli()
		if err := f.deliver(ctx, org, w, items); err != nil {
			if ctx.Err() != nil {
				return time.Time{}, nil // shutting down: not the receiver's fault
			}
			return f.failed(org, &st, w, err)
		}
		st.After = last
		st.Delivered += uint64(len(items))
		st.Attempts, st.NextAttempt, st.LastError = 0, 0, ""
		st.LastSuccess = f.now().UnixMilli()
		if !more {
			st.Through = w.To
			st.Windows++
		}
		if err := f.save(org, &st); err != nil {
			return f.now().Add(f.backoff(1)), err
		}
	}
	return time.Time{}, nil
}

// windowRead is what readWindow found: a batch of the window's events
// (more when the window holds others after it), or, for an empty window,
// skipTo, the end of the empty windows to skip (-1 otherwise).
type windowRead struct {
	items  []json.RawMessage
	last   *Mark
	more   bool
	skipTo int64
}

// readWindow reads the next batch of org's events in window w after the
// cursor after; due is the end of what may be forwarded now.
func (f *Forwarder) readWindow(org uuid.UUID, after *Mark, w Window, due int64) (windowRead, error) {
	wr := windowRead{skipTo: -1}
	i := f.interval()
	err := f.DB.View(func(tx *bolt.Tx) error {
		var err error
		// Everything after the cursor up to the window's end: an event
		// committed late with a time before w.From still goes out now.
		wr.items, wr.last, wr.more, err = f.read(tx, org, after, w.To, f.batch())
		if err != nil || len(wr.items) > 0 {
			return err
		}
		// Nothing in this window: skip the empty windows up to the one
		// holding the next event (or to the end of what is due).
		_, next, _, err := f.read(tx, org, after, due, 1)
		switch {
		case err != nil:
			return err
		case next == nil:
			wr.skipTo = due
		default:
			// next.T > w.To, as the window read found nothing.
			wr.skipTo = max(floorDiv(next.T, i)*i-1, w.To)
		}
		return nil
	})
	return wr, err
}

// Mark is an event's place for the forwarder: its time and metadata.uid,
// both read from the event itself, so the cursor depends only on what the
// query API returns.
type Mark struct {
	T   int64  `json:"t"`
	UID string `json:"uid"`
}

func markOf(ev json.RawMessage) (Mark, error) {
	var e struct {
		Time     int64 `json:"time"`
		Metadata struct {
			UID string `json:"uid"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(ev, &e); err != nil {
		return Mark{}, fmt.Errorf("audit event: %w", err)
	}
	return Mark{T: e.Time, UID: e.Metadata.UID}, nil
}

// read returns, through Run and its cursor, at most limit events of org
// that come after mark (all of them when mark is nil) with a time up to
// end, the mark of the last one, and whether more may follow. Events that
// share the mark's time are skipped up to and including the mark; if the
// mark is no longer there (pruned), they are all returned again: a
// duplicate is allowed, a loss is not.
func (f *Forwarder) read(tx *bolt.Tx, org uuid.UUID, after *Mark, end int64, limit int) ([]json.RawMessage, *Mark, bool, error) {
	q := Query{Org: org, Start: 0, End: end, Limit: limit}
	skipping := after != nil
	if skipping {
		q.Start = after.T
	}
	if q.Start > end {
		return nil, nil, false, nil
	}
	var out, held []json.RawMessage // held: events at the mark's time seen before the mark
	for {
		page, err := f.Log.Run(tx, q)
		if err != nil {
			return nil, nil, false, err
		}
		for n, it := range page.Items {
			if skipping {
				m, err := markOf(it)
				if err != nil {
					return nil, nil, false, err
				}
				switch {
				case m.T == after.T && m.UID == after.UID:
					skipping, held = false, nil
					continue
				case m.T <= after.T:
					held = append(held, it)
					continue
				}
				skipping = false
				out = append(out, held...)
				held = nil
			}
			out = append(out, it)
			if len(out) >= limit {
				return f.finish(out[:limit], len(out) > limit || n < len(page.Items)-1 || page.Next != nil)
			}
		}
		if page.Next == nil {
			break
		}
		q.After = page.Next
	}
	out = append(out, held...) // the mark was not found: send them again
	if len(out) > limit {
		return f.finish(out[:limit], true)
	}
	return f.finish(out, false)
}

func (f *Forwarder) finish(items []json.RawMessage, more bool) ([]json.RawMessage, *Mark, bool, error) {
	if len(items) == 0 {
		return nil, nil, more, nil
	}
	m, err := markOf(items[len(items)-1])
	if err != nil {
		return nil, nil, false, err
	}
	return items, &m, more, nil
}

func (f *Forwarder) failed(org uuid.UUID, st *ForwardState, w Window, err error) (time.Time, error) {
	st.Attempts++
	retry := f.now().Add(f.backoff(st.Attempts))
	st.NextAttempt = retry.UnixMilli()
	st.LastError = err.Error()
	if serr := f.save(org, st); serr != nil {
		err = errors.Join(err, serr)
	}
	return retry, fmt.Errorf("window %s..%s (attempt %d): %w", fmtMS(w.From), fmtMS(w.To), st.Attempts, err)
}

func fmtMS(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }

func (f *Forwarder) state(org uuid.UUID) (ForwardState, error) {
	var st ForwardState
	err := f.DB.View(func(tx *bolt.Tx) error {
		var err error
		st, err = getForwardState(tx, org)
		return err
	})
	return st, err
}

func (f *Forwarder) save(org uuid.UUID, st *ForwardState) error {
	cp := *st
	return f.Update(func(tx *bolt.Tx) error {
		return putForwardState(tx, org, &cp)
	})
}

// deliver sends one batch of a window to the destination.
func (f *Forwarder) deliver(ctx context.Context, org uuid.UUID, w Window, items []json.RawMessage) error {
	u, err := neturl.Parse(f.URL)
	if err != nil {
		return fmt.Errorf("forward URL: %w", err)
	}
	if u.Scheme == "file" {
		return appendLines(u.Path, items)
	}
	var body bytes.Buffer
	body.WriteByte('[')
	for i, it := range items {
		if i > 0 {
			body.WriteByte(',')
		}
		body.Write(it)
	}
	body.WriteByte(']')
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.URL, &body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	ua := f.UserAgent
	if ua == "" {
		ua = "slipway-audit-forwarder"
	}
	req.Header.Set("User-Agent", ua)
	req.Header.Set("X-Slipway-Organization-Id", org.String())
	req.Header.Set("X-Slipway-Window-Start", fmtMS(w.From))
	req.Header.Set("X-Slipway-Window-End", fmtMS(w.To))
	client := f.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		// url.Error repeats the URL, which may carry a token: keep the cause.
		var ue *neturl.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("POST %s: %w", RedactURL(f.URL), err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s: %s", RedactURL(f.URL), resp.Status, bytes.TrimSpace(snippet))
	}
	return nil
}

// appendLines appends one JSON document per line and syncs the file.
func appendLines(path string, items []json.RawMessage) error {
	var buf bytes.Buffer
	for _, it := range items {
		if err := json.Compact(&buf, it); err != nil {
			return fmt.Errorf("event is not JSON: %w", err)
		}
		buf.WriteByte('\n')
	}
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, werr := fh.Write(buf.Bytes())
	serr := fh.Sync()
	cerr := fh.Close()
	return errors.Join(werr, serr, cerr)
}

// RedactURL shows a destination without credentials or query string.
func RedactURL(raw string) string {
	u, err := neturl.Parse(raw)
	if err != nil {
		return "(unparseable URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// ForwardStatus describes the forwarder for `slipway admin audit forward-status`.
type ForwardStatus struct {
	Enabled       bool               `json:"enabled"`
	Target        string             `json:"target,omitempty"`
	Interval      string             `json:"interval,omitempty"`
	Grace         string             `json:"grace,omitempty"`
	DueThrough    string             `json:"due_through,omitempty"` // end of the latest window due now
	Running       bool               `json:"running"`
	LastRun       *time.Time         `json:"last_run,omitempty"`
	Organizations []OrgForwardStatus `json:"organizations"`
}

// OrgForwardStatus is one organization's forwarding progress.
type OrgForwardStatus struct {
	Org string `json:"organization_id"`
	ForwardState
	ForwardedThrough *string `json:"forwarded_through"` // RFC 3339 end of the last window delivered
	PendingWindows   int64   `json:"pending_windows"`   // at most this many windows are queued (empty ones are skipped)
	RetryAt          *string `json:"retry_at,omitempty"`
}

// Status reports the configuration and each organization's persisted state.
func (f *Forwarder) Status() (ForwardStatus, error) {
	st := ForwardStatus{Enabled: f.Enabled(), Organizations: []OrgForwardStatus{}}
	now := f.now()
	due := f.dueEnd(now)
	if st.Enabled {
		st.Target = RedactURL(f.URL)
		st.Interval = (time.Duration(f.interval()) * time.Millisecond).String()
		st.Grace = f.grace().String()
		st.DueThrough = fmtMS(due)
	}
	f.mu.Lock()
	st.Running = f.running
	if !f.lastRun.IsZero() {
		t := f.lastRun
		st.LastRun = &t
	}
	f.mu.Unlock()
	orgs, err := chainOrgs(f.DB)
	if err != nil {
		return st, err
	}
	err = f.DB.View(func(tx *bolt.Tx) error {
		for _, org := range orgs {
			fs, err := getForwardState(tx, org)
			if err != nil {
				return err
			}
			o := OrgForwardStatus{Org: org.String(), ForwardState: fs}
			if fs.Through > 0 {
				s := fmtMS(fs.Through)
				o.ForwardedThrough = &s
			}
			if fs.NextAttempt > 0 {
				s := fmtMS(fs.NextAttempt)
				o.RetryAt = &s
			}
			if st.Enabled && due > fs.Through {
				from := fs.Through
				if from == 0 {
					// Never forwarded: the queue starts at its first event.
					_, first, _, err := f.read(tx, org, nil, due, 1)
					if err != nil {
						return err
					}
					from = due
					if first != nil {
						from = floorDiv(first.T, f.interval())*f.interval() - 1
					}
				}
				o.PendingWindows = (due - from + f.interval() - 1) / f.interval()
			}
			st.Organizations = append(st.Organizations, o)
		}
		return nil
	})
	return st, err
}
