package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// finalStatus reports whether a revision status is final: the official
// deploy client's terminal set. INTERRUPTED is not final: the server
// retries the revision.
func finalStatus(s string) bool {
	switch s {
	case "DEPLOYED", "CREATE_FAILED", "BUILD_FAILED", "DEPLOY_FAILED", "SKIPPED":
		return true
	}
	return false
}

// FollowOptions says what to do with a followed log.
type FollowOptions struct {
	// After skips the build and deploy entries with this id or lower (0:
	// from the start); AfterAgent the agent entries (numbered apart, per
	// deployment).
	After, AfterAgent int64
	// Entry receives each new entry, in order.
	Entry func(LogEntry)
	// Status receives the revision's status whenever it changes.
	Status func(string)
	// Forever keeps following after the revision's status is final (agent
	// output goes on while the revision serves); only ctx ends it.
	Forever bool
}

// LogFollower follows one revision's log until the revision's status is
// final, returning that status. Streamer (server-sent events from the logs
// endpoint's follow mode) is what the deploy path and `logs -f` use;
// Poller is its fallback for control planes without that mode.
type LogFollower interface {
	Follow(ctx context.Context, depID, revID string, opt FollowOptions) (status string, err error)
}

// Poller follows by reading GET /v2/deployments/{id}/revisions/{rid}/logs
// at an interval and passing on the entries past the last id seen: the
// documented endpoint, so it works with any compatible control plane.
type Poller struct {
	Client   *Client
	Interval time.Duration // default 500 ms
}

// transientTries is how many consecutive failed reads a follow survives (a
// server restarting, a dropped connection) before it gives up.
const transientTries = 10

// Follow implements LogFollower.
func (p *Poller) Follow(ctx context.Context, depID, revID string, opt FollowOptions) (string, error) {
	interval := p.Interval
	if interval <= 0 {
		interval = 500 * time.Millisecond
	}
	// Build and deploy lines are numbered per revision, agent lines per
	// deployment: each series has its own last id.
	last, lastAgent, status, failures := opt.After, opt.AfterAgent, "", 0
	for {
		entries, st, err := p.Client.RevisionLogs(ctx, depID, revID)
		var ue *unreachableError
		var ae *APIError
		switch {
		case err == nil:
			failures = 0
		case ctx.Err() != nil:
			return status, ctx.Err()
		case (errors.As(err, &ue) || errors.As(err, &ae) && ae.Status >= 500) && failures < transientTries:
			failures++
		default:
			return status, err
		}
		// The entries before the status: they may have been written by
		// earlier steps than the one the status names (a quick build ends
		// between two reads), and each moves the display's step on.
		for _, e := range entries {
			seen := &last
			if e.Phase == "agent" {
				seen = &lastAgent
			}
			if e.ID > *seen {
				*seen = e.ID
				if opt.Entry != nil {
					opt.Entry(e)
				}
			}
		}
		if err == nil && st != status {
			status = st
			if opt.Status != nil {
				opt.Status(st)
			}
		}
		if err == nil && finalStatus(status) && !opt.Forever {
			return status, nil
		}
		select {
		case <-ctx.Done():
			return status, ctx.Err()
		case <-time.After(interval):
		}
	}
}

// step names where a revision is, for the progress display.
func step(status string) string {
	switch status {
	case "CREATING", "QUEUED", "AWAITING_BUILD":
		return "step 1/3: waiting to build"
	case "BUILDING":
		return "step 2/3: building"
	case "AWAITING_DEPLOY", "DEPLOYING":
		return "step 3/3: deploying"
	case "INTERRUPTED":
		return "interrupted by a server restart; retrying"
	case "DEPLOYED":
		return "deployed"
	}
	return strings.ToLower(strings.ReplaceAll(status, "_", " "))
}

// progress shows a followed revision: on a terminal, log lines scroll above
// a status line redrawn every second (step, elapsed time); otherwise plain
// lines, one per status change and per log entry, for CI logs.
type progress struct {
	out   io.Writer
	tty   bool
	start time.Time
	label string

	mu     sync.Mutex
	status string
	drawn  bool
	stop   chan struct{}
	done   sync.WaitGroup
}

func newProgress(out io.Writer, isTTY bool, label string) *progress {
	p := &progress{out: out, tty: isTTY, start: time.Now(), label: label, stop: make(chan struct{})}
	if isTTY {
		p.done.Add(1)
		go func() {
			defer p.done.Done()
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-p.stop:
					return
				case <-t.C:
					p.mu.Lock()
					p.draw()
					p.mu.Unlock()
				}
			}
		}()
	}
	return p
}

func (p *progress) elapsed() string {
	d := time.Since(p.start).Round(time.Second)
	return fmt.Sprintf("%d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

// draw rewrites the status line; mu held.
func (p *progress) draw() {
	if !p.tty || p.status == "" {
		return
	}
	fmt.Fprintf(p.out, "\r\033[K\033[1m%s\033[0m %s · %s elapsed", p.label, step(p.status), p.elapsed())
	p.drawn = true
}

// clear removes the status line so that a log line can take its place; mu held.
func (p *progress) clear() {
	if p.drawn {
		fmt.Fprint(p.out, "\r\033[K")
		p.drawn = false
	}
}

// rank orders the steps, so that a step inferred from a log line's phase
// only ever moves the display forward.
func rank(status string) int {
	switch status {
	case "CREATING", "QUEUED", "AWAITING_BUILD":
		return 1
	case "BUILDING":
		return 2
	case "AWAITING_DEPLOY", "DEPLOYING":
		return 3
	case "":
		return 0
	}
	return 4
}

// Status records a status change.
func (p *progress) Status(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setStatus(s)
}

// setStatus shows s; mu held. A step already shown (inferred from a log
// line, then read as a status) is not shown twice.
func (p *progress) setStatus(s string) {
	same := p.status != "" && step(s) == step(p.status)
	p.status = s
	if same {
		return
	}
	if p.tty {
		p.clear()
		p.draw()
		return
	}
	fmt.Fprintf(p.out, "[%s] %s (%s)\n", p.elapsed(), step(s), s)
}

// Entry prints one log line. A line of a later phase than the status last
// read moves the step on: a quick build can start and end between two
// reads of the status.
func (p *progress) Entry(e LogEntry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if inferred := map[string]string{"build": "BUILDING", "deploy": "DEPLOYING"}[e.Phase]; inferred != "" && rank(inferred) > rank(p.status) {
		p.setStatus(inferred)
	}
	p.clear()
	fmt.Fprintf(p.out, "  %-6s | %s\n", e.Phase, strings.TrimRight(e.Message, "\n"))
	p.draw()
}

// Close stops redrawing and leaves the cursor on a fresh line.
func (p *progress) Close() {
	close(p.stop)
	p.done.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
}

// Elapsed is the time since the follow started, rounded for people.
func (p *progress) Elapsed() time.Duration { return time.Since(p.start).Round(100 * time.Millisecond) }
