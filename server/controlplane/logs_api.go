package controlplane

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/julienschmidt/httprouter"
	bolt "go.etcd.io/bbolt"

	"slipway/server/auth"
	"slipway/server/httpx"
	"slipway/storage"
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

// readLogs returns a revision's log entries of one phase ("" for all),
// oldest first.
func (s *Service) readLogs(ws, dep, rid uuid.UUID, phase string) ([]LogEntry, string, error) {
	var out []LogEntry
	var status string
	err := s.DB.View(func(tx *bolt.Tx) error {
		_, rev, err := loadRevision(tx, ws, dep, rid)
		if err != nil {
			return err
		}
		status = rev.Status
		c := tx.Bucket([]byte(storage.BucketRevisionLogs)).Cursor()
		prefix := storage.Key(rid)
		for k, v := c.Seek(prefix); k != nil && strings.HasPrefix(string(k), string(prefix)); k, v = c.Next() {
			var e LogEntry
			if err := json.Unmarshal(v, &e); err != nil {
				return err
			}
			if phase == "" || e.Phase == phase {
				out = append(out, e)
			}
		}
		return nil
	})
	return out, status, err
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
		var q logQuery
		if r.ContentLength != 0 {
			if err := httpx.DecodeJSON(r, &q, true); err != nil {
				return err
			}
		}
		if q.Limit == 0 {
			q.Limit = 100
		}
		if q.Limit < 1 || q.Limit > 1000 {
			return httpx.Invalid("less_than_equal", "limit must be between 1 and 1000", "body", "limit")
		}
		if q.Order == "" {
			q.Order = "asc"
		}
		if q.Order != "asc" && q.Order != "desc" {
			return httpx.Invalid("enum", "order must be asc or desc", "body", "order")
		}
		offset := 0
		switch v := q.Offset.(type) {
		case nil:
		case float64:
			offset = int(v)
		case string:
			if _, err := fmt.Sscanf(v, "%d", &offset); err != nil && v != "" {
				return httpx.Invalid("int_parsing", "offset must be the next_offset of a previous page", "body", "offset")
			}
		default:
			return httpx.Invalid("int_parsing", "offset must be the next_offset of a previous page", "body", "offset")
		}
		if offset < 0 {
			return httpx.Invalid("greater_than_equal", "offset must not be negative", "body", "offset")
		}
		entries, _, err := s.readLogs(p.WorkspaceID, dep, rid, phase)
		if err != nil {
			return err
		}
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
			for i, j := 0, len(match)-1; i < j; i, j = i+1, j-1 {
				match[i], match[j] = match[j], match[i]
			}
		}
		page := []LogEntry{}
		if offset < len(match) {
			page = match[offset:min(len(match), offset+q.Limit)]
		}
		var next *string
		if offset+len(page) < len(match) {
			n := fmt.Sprint(offset + len(page))
			next = &n
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]any{"logs": page, "next_offset": next})
		return nil
	}
}

// revisionLogs: GET /v2/deployments/{id}/revisions/{rid}/logs — the
// revision's log as JSON, or with follow=true as server-sent events that
// end once the revision reaches a final status.
func (s *Service) revisionLogs(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p := auth.From(r)
	dep, rid, err := deploymentAndRevisionIDs(ps)
	if err != nil {
		return err
	}
	entries, status, err := s.readLogs(p.WorkspaceID, dep, rid, "")
	if err != nil {
		return err
	}
	if r.URL.Query().Get("follow") != "true" && r.URL.Query().Get("follow") != "1" {
		if entries == nil {
			entries = []LogEntry{}
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]any{"logs": entries, "status": status})
		return nil
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	sent := 0
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, e := range entries[sent:] {
			raw, _ := json.Marshal(e)
			if _, err := fmt.Fprintf(w, "event: log\nid: %d\ndata: %s\n\n", e.ID, raw); err != nil {
				return nil
			}
		}
		sent = len(entries)
		if RevisionTerminal(status) && status != RevisionInterrupted {
			fmt.Fprintf(w, "event: end\ndata: {\"status\": %q}\n\n", status)
			if flusher != nil {
				flusher.Flush()
			}
			return nil
		}
		if flusher != nil {
			flusher.Flush()
		}
		select {
		case <-r.Context().Done():
			return nil
		case <-tick.C:
		}
		if entries, status, err = s.readLogs(p.WorkspaceID, dep, rid, ""); err != nil {
			return nil
		}
	}
}
