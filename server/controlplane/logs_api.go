package controlplane

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/julienschmidt/httprouter"
	bolt "go.etcd.io/bbolt"

	"slipway/server/auth"
	"slipway/server/httpx"
	"slipway/storage/errs"
)

// logQuery is the body the official deploy client posts to the build_logs
// and deploy_logs endpoints.
type logQuery struct {
	Limit     int        `json:"limit"`
	Order     string     `json:"order"`
	Offset    any        `json:"offset"`
	StartTime *time.Time `json:"start_time"`
	EndTime   *time.Time `json:"end_time"`
	Level     string     `json:"level"`
	Query     string     `json:"query"`
}

// logPhases are the sources of a revision's log.
var logPhases = []string{"build", "deploy", "agent"}

// logCursor is where a follower stands in the two sources of a revision's
// log: the last build/deploy line and the last agent line it was sent. It
// is the SSE event id ("12-5"), so a client that reconnects with
// Last-Event-ID misses nothing and sees nothing twice.
type logCursor struct{ rev, agent int64 }

func (c logCursor) String() string { return fmt.Sprintf("%d-%d", c.rev, c.agent) }

// advance moves the cursor past e; false when e was already sent.
func (c *logCursor) advance(e LogEntry) bool {
	p := &c.rev
	if e.Phase == "agent" {
		p = &c.agent
	}
	if e.ID <= *p {
		return false
	}
	*p = e.ID
	return true
}

// parseCursor reads Last-Event-ID (or last_event_id in the query, for
// clients that cannot set headers).
func parseCursor(r *http.Request) (logCursor, error) {
	v, loc := r.Header.Get("Last-Event-ID"), []any{"header", "Last-Event-ID"}
	if q := r.URL.Query().Get("last_event_id"); q != "" {
		v, loc = q, []any{"query", "last_event_id"}
	}
	var c logCursor
	if v == "" {
		return c, nil
	}
	a, b, ok := strings.Cut(v, "-")
	var err1, err2 error
	c.rev, err1 = strconv.ParseInt(a, 10, 64)
	c.agent, err2 = strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || c.rev < 0 || c.agent < 0 {
		return logCursor{}, httpx.Invalid("value_error", "must be the id of an event of this stream, such as 12-5", loc...)
	}
	return c, nil
}

// revisionLogState is a revision's log after a cursor, and what decides
// whether following it is over.
type revisionLogState struct {
	entries []LogEntry
	more    bool // a page: more lines follow the entries
	status  string
	active  bool // the deployment's active revision
	// retried: an INTERRUPTED revision the reconciler will try again (it
	// is still the latest and has attempts left).
	retried bool
}

// over says whether nothing more will be written to the log a follower
// reads: the revision reached a final status and no log of it is open,
// and, when the follower follows agent output while it serves, the
// revision does not serve.
func (st revisionLogState) over(s *Service, rid string, serving bool) bool {
	final := RevisionTerminal(st.status) && !(st.status == RevisionInterrupted && st.retried)
	return final && !s.book().logOpen(rid) && (!serving || !st.active)
}

// readLogs returns a revision's log lines of the given phases (all when
// nil) after cur, oldest first, build/deploy and agent lines merged by
// time. With a budget (bytes of stored lines per source, 0 for none) it
// returns a page, and more says whether lines follow it.
func (s *Service) readLogs(ws, dep, rid uuid.UUID, phases map[string]bool, cur logCursor, budget int) (revisionLogState, error) {
	var st revisionLogState
	err := s.DB.View(func(tx *bolt.Tx) error {
		d, rev, err := loadRevision(tx, ws, dep, rid)
		if err != nil {
			return err
		}
		st.status = rev.Status
		st.active = d.ActiveRevisionID != nil && *d.ActiveRevisionID == rev.ID
		st.retried = d.LatestRevisionID != nil && *d.LatestRevisionID == rev.ID && rev.Attempt < maxAttempts
		var own, agent []LogEntry
		var ownFull, agentFull bool
		if phases == nil || phases["build"] || phases["deploy"] {
			if own, ownFull, err = readRevisionLogs(tx, rid, cur.rev, phases, budget); err != nil {
				return err
			}
		}
		if phases == nil || phases["agent"] {
			if agent, agentFull, err = readAgentLogs(tx, dep, &rid, cur.agent, budget); err != nil {
				return err
			}
		}
		st.entries, st.more = mergePages(own, agent, ownFull, agentFull)
		return nil
	})
	return st, err
}

// phaseLogs: POST /v1/projects/{id}/revisions/{rid}/build_logs|deploy_logs
// → {logs, next_offset}.
func (s *Service) phaseLogs(phase string) httpx.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		p := auth.From(r)
		dep, rid, err := deploymentAndRevisionIDs(ps)
		if err != nil {
			return err
		}
		q, offset, err := decodeLogQuery(r)
		if err != nil {
			return err
		}
		// The deploy log is what the official client shows while a
		// revision starts: its agent's output belongs there too.
		phases := map[string]bool{phase: true}
		if phase == "deploy" {
			phases["agent"] = true
		}
		st, err := s.readLogs(p.WorkspaceID, dep, rid, phases, logCursor{}, 0)
		if err != nil {
			return err
		}
		match := q.filter(st.entries)
		page := []LogEntry{}
		if offset < len(match) {
			page = match[offset:min(len(match), offset+q.Limit)]
		}
		var next *string
		// While the build runs, its log grows: the official deploy client
		// polls with the last next_offset it got and keeps the previous one
		// when it gets null, so that null at the end of a growing log would
		// have it read the last page again on every poll.
		growing := phase == "build" && q.Order == "asc" &&
			(st.status == RevisionQueued || st.status == RevisionAwaitingBuild || st.status == RevisionBuilding)
		if offset+len(page) < len(match) || growing && len(page) > 0 {
			n := fmt.Sprint(offset + len(page))
			next = &n
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]any{"logs": page, "next_offset": next})
		return nil
	}
}

// decodeLogQuery reads a phase-log request's optional body, with its
// defaults (limit 100, ascending), and the offset it asks for.
func decodeLogQuery(r *http.Request) (q logQuery, offset int, err error) {
	if r.ContentLength != 0 {
		if err := httpx.DecodeJSON(r, &q, true); err != nil {
			return q, 0, err
		}
	}
	if q.Limit == 0 {
		q.Limit = 100
	}
	if q.Limit < 1 || q.Limit > 1000 {
		return q, 0, httpx.Invalid("less_than_equal", "limit must be between 1 and 1000", "body", "limit")
	}
	if q.Order == "" {
		q.Order = "asc"
	}
	if q.Order != "asc" && q.Order != "desc" {
		return q, 0, httpx.Invalid("enum", "order must be asc or desc", "body", "order")
	}
	badOffset := httpx.Invalid("int_parsing", "offset must be the next_offset of a previous page", "body", "offset")
	switch v := q.Offset.(type) {
	case nil:
	case float64:
		offset = int(v)
	case string:
		if _, err := fmt.Sscanf(v, "%d", &offset); err != nil && v != "" {
			return q, 0, badOffset
		}
	default:
		return q, 0, badOffset
	}
	if offset < 0 {
		return q, 0, httpx.Invalid("greater_than_equal", "offset must not be negative", "body", "offset")
	}
	return q, offset, nil
}

// filter returns the entries the query's time range, level and text
// select, in its order.
func (q *logQuery) filter(entries []LogEntry) []LogEntry {
	var match []LogEntry
	for _, e := range entries {
		if q.StartTime != nil && e.Timestamp.Before(*q.StartTime) || q.EndTime != nil && e.Timestamp.After(*q.EndTime) ||
			q.Level != "" && !strings.EqualFold(e.Level, q.Level) ||
			q.Query != "" && !strings.Contains(strings.ToLower(e.Message), strings.ToLower(q.Query)) {
			continue
		}
		match = append(match, e)
	}
	if q.Order == "desc" {
		slices.Reverse(match)
	}
	return match
}

// wantsStream says whether a log request asks for server-sent events.
func wantsStream(r *http.Request) bool {
	f := r.URL.Query().Get("follow")
	return f == "true" || f == "1" || strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// revisionLogs: GET /v2/deployments/{id}/revisions/{rid}/logs[?phase=build,deploy,agent]
// — the revision's log as JSON, or with follow=true (or Accept:
// text/event-stream) as server-sent events: what is stored, then new lines
// as they are written, until the revision is final and nothing is left to
// write; a follower that names phase=agent goes on while it serves.
func (s *Service) revisionLogs(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p := auth.From(r)
	dep, rid, err := deploymentAndRevisionIDs(ps)
	if err != nil {
		return err
	}
	phases, err := csvEnum(r.URL.Query().Get("phase"), "phase", logPhases)
	if err != nil {
		return err
	}
	cur, err := parseCursor(r)
	if err != nil {
		return err
	}
	if !wantsStream(r) {
		st, err := s.readLogs(p.WorkspaceID, dep, rid, phases, logCursor{}, 0)
		if err != nil {
			return err
		}
		if st.entries == nil {
			st.entries = []LogEntry{}
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]any{"logs": st.entries, "status": st.status, "is_active": st.active})
		return nil
	}
	// Agent lines are part of the stream unless phase leaves them out,
	// but only a follower that names phase=agent keeps following them
	// once the revision is deployed: the plain follow ends with the
	// revision, as a deploy script waiting for it wants.
	agent := phases == nil || phases["agent"]
	serving := phases["agent"]
	// The revision must exist (404 otherwise); its lines are read by the
	// follower once it holds a slot, so a refused one costs no more than
	// this.
	if _, err := s.readLogs(p.WorkspaceID, dep, rid, map[string]bool{}, logCursor{}, 0); err != nil {
		return err
	}
	return s.follow(w, r, cur, []string{revisionTopic(rid.String()), deploymentTopic(dep.String())},
		func(e LogEntry) bool {
			if e.Phase == "agent" {
				return agent && e.RevisionID == rid.String()
			}
			return phases == nil || phases[e.Phase]
		},
		func(cur logCursor) ([]LogEntry, bool, error) {
			st, err := s.readLogs(p.WorkspaceID, dep, rid, phases, cur, catchUpPage)
			return st.entries, st.more, err
		},
		func() (string, error) {
			// No phase: the status alone.
			st, err := s.readLogs(p.WorkspaceID, dep, rid, map[string]bool{}, logCursor{}, 0)
			switch {
			case isNotFound(err):
				return "DELETED", nil
			case err != nil:
				return "", err
			case st.over(s, rid.String(), serving):
				return st.status, nil
			}
			return "", nil
		})
}

// isNotFound says err is a not-found the store wrote for the client (a
// bare storage.ErrNotFound is not: it would be an index out of step).
func isNotFound(err error) bool {
	e, ok := errs.As(err)
	return ok && e.Kind == errs.NotFound
}

// deploymentLogs: GET /v2/deployments/{id}/logs[?revision_id=] — the
// deployment's agent output (every revision's that its bounded log still
// holds, oldest first), as JSON or, with follow=true, as server-sent
// events that follow whichever revision serves until the deployment is
// deleted.
func (s *Service) deploymentLogs(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p := auth.From(r)
	dep, err := httpx.ParseID(ps.ByName("id"), "path", "deployment_id")
	if err != nil {
		return err
	}
	var rev *uuid.UUID
	if v := r.URL.Query().Get("revision_id"); v != "" {
		id, err := httpx.ParseID(v, "query", "revision_id")
		if err != nil {
			return err
		}
		rev = &id
	}
	cur, err := parseCursor(r)
	if err != nil {
		return err
	}
	read := func(cur logCursor, budget int) ([]LogEntry, bool, *deploymentRecord, error) {
		var out []LogEntry
		var more bool
		var d *deploymentRecord
		err := s.DB.View(func(tx *bolt.Tx) error {
			var err error
			if d, err = loadDeployment(tx, p.WorkspaceID, dep); err != nil {
				return err
			}
			out, more, err = readAgentLogs(tx, dep, rev, cur.agent, budget)
			return err
		})
		return out, more, d, err
	}
	if !wantsStream(r) {
		entries, _, d, err := read(logCursor{}, 0)
		if err != nil {
			return err
		}
		if entries == nil {
			entries = []LogEntry{}
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]any{"logs": entries, "active_revision_id": d.ActiveRevisionID})
		return nil
	}
	// The deployment must exist (404 otherwise); see revisionLogs.
	if err := s.DB.View(func(tx *bolt.Tx) error {
		_, err := loadDeployment(tx, p.WorkspaceID, dep)
		return err
	}); err != nil {
		return err
	}
	return s.follow(w, r, cur, []string{deploymentTopic(dep.String())},
		func(e LogEntry) bool { return rev == nil || e.RevisionID == rev.String() },
		func(cur logCursor) ([]LogEntry, bool, error) {
			entries, more, _, err := read(cur, catchUpPage)
			return entries, more, err
		},
		func() (string, error) {
			err := s.DB.View(func(tx *bolt.Tx) error {
				_, err := loadDeployment(tx, p.WorkspaceID, dep)
				return err
			})
			if isNotFound(err) {
				return "DELETED", nil
			}
			return "", err
		})
}

// follow streams log lines as server-sent events: every line after cur
// that read finds, then the lines published to topics (those keep
// accepts) as they are committed, until final reports the stream is over
// (a non-empty final status, sent in an "end" event) or the client goes.
// Each event's id is the cursor after it. A quiet stream sends a comment
// every Heartbeat. A follower that falls behind the hub's buffer is
// dropped there and catches up here from the database. A follower holds
// one of its credential's slots (followerSlots) until it ends: beyond the
// caps it is refused with 429 before anything is read.
func (s *Service) follow(w http.ResponseWriter, r *http.Request, cur logCursor, topics []string,
	keep func(LogEntry) bool, read func(logCursor) ([]LogEntry, bool, error), final func() (string, error)) error {
	release, err := s.followSlot(w, r)
	if err != nil {
		return err
	}
	defer release()
	f := &follower{s: s, st: startStream(w, cur), read: read, final: final, keep: keep}
	heartbeat := time.NewTicker(s.heartbeat())
	defer heartbeat.Stop()
	// Statuses are not published: they are read again once a second.
	check := time.NewTicker(time.Second)
	defer check.Stop()
	for {
		sub := s.book().hub.Subscribe(subscriberBuffer, topics...)
		// Read after subscribing: a line committed in between is both
		// read and published, and the cursor sends it once.
		over := f.catchUp() || f.live(r, sub, heartbeat.C, check.C)
		sub.Close()
		if over {
			return nil
		}
	}
}

// sseStream writes log lines as server-sent events, each once: its cursor
// moves past every line sent.
type sseStream struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	cur logCursor
}

func startStream(w http.ResponseWriter, cur logCursor) *sseStream {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	return &sseStream{w: w, rc: http.NewResponseController(w), cur: cur}
}

// send writes the entries after the cursor and flushes them.
func (st *sseStream) send(entries []LogEntry) error {
	for _, e := range entries {
		if !st.cur.advance(e) {
			continue
		}
		raw, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(st.w, "id: %s\nevent: log\ndata: %s\n\n", st.cur, raw); err != nil {
			return err
		}
	}
	return st.rc.Flush()
}

// follower is one client following a log (see follow).
type follower struct {
	s     *Service
	st    *sseStream
	read  func(logCursor) (entries []LogEntry, more bool, err error) // a page after the cursor
	final func() (string, error)
	keep  func(LogEntry) bool
}

// catchUp sends what the database holds after the cursor and reports
// whether the stream is over (ended, or failed).
func (f *follower) catchUp() bool {
	err := f.sendStored()
	var status string
	if err == nil {
		status, err = f.final()
	}
	return f.over(status, err)
}

// catchUpPage bounds, in bytes of stored lines per source, what a
// follower reads from the database at once: a follower whose client reads
// slowly holds one page while its write waits, never the whole log.
const catchUpPage = 64 << 10

// sendStored sends the stored lines after the cursor, a page at a time.
func (f *follower) sendStored() error {
	for {
		entries, more, err := f.read(f.st.cur)
		if err != nil {
			return err
		}
		if err := f.st.send(entries); err != nil {
			return err
		}
		if !more {
			return nil
		}
	}
}

// over ends the stream when final said so (status) and reports whether it
// is over: ended, or failed (err).
func (f *follower) over(status string, err error) bool {
	if err == nil && status != "" {
		_ = f.end(status)
	}
	return err != nil || status != ""
}

// end sends what is left and the final status. Agent output still
// buffered for the database is written first, so that the last lines of
// an agent that failed its deploy are part of the stream.
func (f *follower) end(status string) error {
	f.s.agentLog().Flush()
	if err := f.sendStored(); err != nil && !isNotFound(err) {
		return err
	}
	fmt.Fprintf(f.st.w, "event: end\ndata: {\"status\": %q}\n\n", status)
	return f.st.rc.Flush()
}

// live sends the lines published to sub as they come, a heartbeat when
// quiet, and checks the status on each tick of check. It reports whether
// the stream is over; false means the hub dropped the follower, which
// then catches up from the database.
func (f *follower) live(r *http.Request, sub *subscription, heartbeat, check <-chan time.Time) bool {
	for {
		select {
		case <-r.Context().Done():
			return true
		case <-sub.Ready:
			batch, ok := sub.Take()
			if !ok {
				return false
			}
			if f.st.send(f.kept(batch)) != nil {
				return true
			}
		case <-heartbeat:
			if _, err := io.WriteString(f.st.w, ": keep-alive\n\n"); err != nil || f.st.rc.Flush() != nil {
				return true
			}
		case <-check:
			if status, err := f.final(); f.over(status, err) {
				return true
			}
		}
	}
}

// kept filters a batch through keep.
func (f *follower) kept(batch []LogEntry) []LogEntry {
	out := batch[:0]
	for _, e := range batch {
		if f.keep(e) {
			out = append(out, e)
		}
	}
	return out
}
