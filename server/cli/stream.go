package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Streamer follows a revision's log through the logs endpoint's follow
// mode (server-sent events): each line arrives as it is written, and the
// stream's "end" event carries the final status. Against a control plane
// whose logs endpoint has no follow mode (it answers JSON), it falls back
// to polling, so the deploy path still works with any compatible server.
type Streamer struct {
	Client *Client
}

// Follow implements LogFollower.
func (s *Streamer) Follow(ctx context.Context, depID, revID string, opt FollowOptions) (string, error) {
	q := url.Values{"follow": {"true"}}
	if opt.Forever {
		// Named explicitly, the agent phase keeps the stream open while
		// the revision serves.
		q.Set("phase", "build,deploy,agent")
	}
	path := "/v2/deployments/" + url.PathEscape(depID) + "/revisions/" + url.PathEscape(revID) + "/logs?" + q.Encode()
	// The stream carries lines, not statuses, and replays the revision's
	// lines from the start; each line moves the step on. The status read
	// now is passed on only when it comes before every line (waiting to
	// build): a quick build is already deploying by now, and showing that
	// before the build's lines would put the steps out of order.
	if rev, err := s.Client.Revision(ctx, depID, revID); err == nil && opt.Status != nil && rank(rev.Status) <= 1 {
		opt.Status(rev.Status)
	}
	cursor, failures := "", 0
	for {
		status, next, err := s.stream(ctx, path, cursor, opt)
		cursor = next
		var ue *unreachableError
		switch {
		case errors.Is(err, errNoFollowMode):
			return (&Poller{Client: s.Client}).Follow(ctx, depID, revID, opt)
		case err == nil:
			if opt.Status != nil {
				opt.Status(status)
			}
			return status, nil
		case ctx.Err() != nil:
			return "", ctx.Err()
		case errors.As(err, &ue) && failures < transientTries:
			// A server restart or a dropped connection: resume after the
			// last line received.
			failures++
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
		default:
			return "", err
		}
	}
}

var errNoFollowMode = errors.New("the logs endpoint has no follow mode")

// stream reads one connection's events; it returns the final status from
// the "end" event, and the cursor to resume from.
func (s *Streamer) stream(ctx context.Context, path, cursor string, opt FollowOptions) (status, next string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Client.BaseURL+path, nil)
	if err != nil {
		return "", cursor, fail(ExitUsage, "bad server URL %q: %v", s.Client.BaseURL, err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if cursor != "" {
		req.Header.Set("Last-Event-ID", cursor)
	}
	s.Client.authenticate(req)
	// No client timeout: a followed stream lasts as long as the build, or
	// as the agent serves; ctx ends it.
	resp, err := s.Client.exchange(req, false)
	if err != nil {
		return "", cursor, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var raw [64 << 10]byte
		n, _ := resp.Body.Read(raw[:])
		return "", cursor, &APIError{Method: req.Method, Path: req.URL.Path, Status: resp.StatusCode, Detail: detailOf(raw[:n])}
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return "", cursor, errNoFollowMode
	}
	ev := sseEvent{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20) // one line of log as JSON
	for sc.Scan() {
		line := sc.Text()
		if line != "" {
			ev.add(line)
			continue
		}
		switch ev.name {
		case "log":
			var e LogEntry
			if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
				return "", cursor, fmt.Errorf("a log event from the server is not a log line: %w", err)
			}
			if ev.id != "" {
				cursor = ev.id
			}
			// After counts build and deploy lines; agent lines are
			// numbered apart, per deployment.
			if opt.Entry != nil && (e.Phase == "agent" && e.ID > opt.AfterAgent || e.Phase != "agent" && e.ID > opt.After) {
				opt.Entry(e)
			}
		case "end":
			var end struct {
				Status string `json:"status"`
			}
			if err := json.Unmarshal([]byte(ev.data), &end); err != nil {
				return "", cursor, fmt.Errorf("the end event from the server has no status: %w", err)
			}
			return end.Status, cursor, nil
		}
		ev = sseEvent{}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return "", cursor, &unreachableError{url: s.Client.BaseURL, err: err}
	}
	if ctx.Err() != nil {
		return "", cursor, ctx.Err()
	}
	// The server closed the stream without an end event: resume.
	return "", cursor, &unreachableError{url: s.Client.BaseURL, err: errors.New("the log stream closed early")}
}

// sseEvent is one server-sent event being read, field by field.
type sseEvent struct{ id, name, data string }

// add takes one non-empty line of the event; comments (heartbeats) and
// unknown fields are ignored, as the format requires.
func (e *sseEvent) add(line string) {
	field, value, _ := strings.Cut(line, ":")
	value = strings.TrimPrefix(value, " ")
	switch field {
	case "id":
		e.id = value
	case "event":
		e.name = value
	case "data":
		if e.data != "" {
			e.data += "\n"
		}
		e.data += value
	}
}
