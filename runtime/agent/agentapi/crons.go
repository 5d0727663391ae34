package agentapi

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/julienschmidt/httprouter"

	"slipway/runtime/agent"
	"slipway/server/httpx"
)

// cronFields are the fields of a cron a search may select.
var cronFields = []string{"cron_id", "assistant_id", "thread_id", "user_id", "end_time", "schedule", "timezone",
	"payload", "next_run_date", "metadata", "on_run_completed", "enabled", "created_at", "updated_at"}

// cronBody is the cron-level part of a cron request; the whole body is
// also the run request the cron repeats (its payload).
type cronBody struct {
	Schedule       *string        `json:"schedule"`
	Timezone       *string        `json:"timezone"`
	EndTimeRaw     any            `json:"end_time"`
	EndTime        *time.Time     `json:"-"`
	Enabled        *bool          `json:"enabled"`
	OnRunCompleted *string        `json:"on_run_completed"`
	Metadata       map[string]any `json:"metadata"`
}

// endTimeLayouts are the forms end_time may take: RFC 3339, or without
// a zone (UTC), as Python's datetime.isoformat() writes a naive time.
var endTimeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999"}

func parseEndTime(v any) (*time.Time, error) {
	s, ok := v.(string)
	if !ok {
		return nil, httpx.Unprocessable("end_time must be a date-time string")
	}
	for _, l := range endTimeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			t = t.UTC()
			return &t, nil
		}
	}
	return nil, httpx.Unprocessable("end_time must be an ISO 8601 date-time, not %q", s)
}

// readObject reads a JSON object body, checked like every API body.
func readObject(r *http.Request) ([]byte, map[string]any, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, nil, httpx.JSONError(err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	if err := httpx.CheckJSON(body); err != nil {
		return nil, nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, nil, httpx.JSONError(err)
	}
	if m == nil {
		return nil, nil, httpx.Unprocessable("the body must be a JSON object")
	}
	return body, m, nil
}

func decodeCronBody(body []byte) (cronBody, error) {
	var cb cronBody
	if err := json.Unmarshal(body, &cb); err != nil {
		return cb, httpx.JSONError(err)
	}
	if cb.EndTimeRaw != nil {
		t, err := parseEndTime(cb.EndTimeRaw)
		if err != nil {
			return cb, err
		}
		cb.EndTime = t
	}
	if cb.OnRunCompleted != nil {
		if err := oneOf(*cb.OnRunCompleted, "on_run_completed", "delete", "keep"); err != nil {
			return cb, err
		}
	}
	if cb.Timezone != nil && *cb.Timezone != "" {
		if _, err := agent.NextCronDate("* * * * *", *cb.Timezone, time.Now()); err != nil {
			return cb, err
		}
	}
	return cb, nil
}

// createCron serves POST /runs/crons (thread "") and
// POST /threads/{thread_id}/runs/crons.
func (a *API) createCron(w http.ResponseWriter, r *http.Request, thread string) error {
	body, payload, err := readObject(r)
	if err != nil {
		return err
	}
	// The payload is a run request: checked as one.
	if _, err := decodeRunCreate(body); err != nil {
		return err
	}
	cb, err := decodeCronBody(body)
	if err != nil {
		return err
	}
	if cb.Schedule == nil || *cb.Schedule == "" {
		return httpx.Unprocessable("schedule is required")
	}
	cc := agent.CronCreate{ThreadID: thread, Schedule: *cb.Schedule, EndTime: cb.EndTime, Enabled: true,
		Metadata: cb.Metadata, Payload: payload}
	if cb.Timezone != nil {
		cc.Timezone = *cb.Timezone
	}
	if cb.Enabled != nil {
		cc.Enabled = *cb.Enabled
	}
	if cb.OnRunCompleted != nil {
		cc.OnRunCompleted = *cb.OnRunCompleted
	}
	return reply(w)(a.Engine.CreateCron(cc))
}

func cronID(ps httprouter.Params) (string, error) {
	id := ps.ByName("cron_id")
	if _, err := uuid.Parse(id); err != nil {
		return "", httpx.Unprocessable("Invalid cron ID: must be a UUID")
	}
	return strings.ToLower(id), nil
}

// onCron serves /runs/crons/{cron_id} (and search and count, by POST).
func (a *API) onCron(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	if ps.ByName("action") != "crons" {
		return httpx.NotFound("Not Found")
	}
	if r.Method == http.MethodPost {
		switch ps.ByName("cron_id") {
		case "search":
			return a.searchCrons(w, r, false)
		case "count":
			return a.searchCrons(w, r, true)
		}
		return httpx.Errorf(http.StatusMethodNotAllowed, "Method Not Allowed")
	}
	id, err := cronID(ps)
	if err != nil {
		return err
	}
	switch r.Method {
	case http.MethodGet:
		return reply(w)(a.Engine.GetCron(id))
	case http.MethodDelete:
		return noContent(w, a.Engine.DeleteCron(id))
	}
	return a.patchCron(w, r, id)
}

// patchCron applies an update: the cron-level fields, and the rest of
// the body merged into the cron's run request as the reference does.
func (a *API) patchCron(w http.ResponseWriter, r *http.Request, id string) error {
	body, m, err := readObject(r)
	if err != nil {
		return err
	}
	if len(m) == 0 {
		return httpx.Errorf(http.StatusBadRequest, "Request body cannot be empty")
	}
	cb, err := decodeCronBody(body)
	if err != nil {
		return err
	}
	p := agent.CronPatch{Schedule: cb.Schedule, Timezone: cb.Timezone, EndTime: cb.EndTime, Enabled: cb.Enabled,
		OnRunCompleted: cb.OnRunCompleted, Metadata: cb.Metadata}
	// An explicit end_time null clears it; an absent one leaves it.
	if v, ok := m["end_time"]; ok && v == nil {
		p.ClearEndTime = true
	}
	if cb.Schedule != nil && *cb.Schedule == "" {
		return httpx.Unprocessable("schedule must not be empty")
	}
	// As the reference, the whole patch is merged into the payload (the
	// create request the cron was made from, schedule and all), so a
	// client reading payload sees the schedule and enabled it set; the
	// assistant stays the cron's own.
	run := map[string]any{}
	for k, v := range m {
		if k != "assistant_id" {
			run[k] = v
		}
	}
	if len(run) > 0 {
		// What the merge would give must still be a valid run request.
		probe := map[string]any{"assistant_id": "x"}
		maps.Copy(probe, run)
		raw, _ := json.Marshal(probe)
		if _, err := decodeRunCreate(raw); err != nil {
			return err
		}
		p.Payload = run
	}
	return reply(w)(a.Engine.UpdateCron(id, p))
}

// searchCrons serves POST /runs/crons/search and /runs/crons/count.
func (a *API) searchCrons(w http.ResponseWriter, r *http.Request, count bool) error {
	var req struct {
		page
		AssistantID string         `json:"assistant_id"`
		ThreadID    string         `json:"thread_id"`
		Enabled     *bool          `json:"enabled"`
		Metadata    map[string]any `json:"metadata"`
		SortBy      string         `json:"sort_by"`
		SortOrder   string         `json:"sort_order"`
		Select      []string       `json:"select"`
	}
	if err := decodePage(r, &req, &req.page, 10); err != nil {
		return err
	}
	for _, c := range []struct{ v, name string }{{req.AssistantID, "assistant ID"}, {req.ThreadID, "thread ID"}} {
		if c.v != "" {
			if _, err := uuid.Parse(c.v); err != nil {
				return httpx.Unprocessable("Invalid %s: must be a UUID", c.name)
			}
		}
	}
	sortBy := strings.ToLower(req.SortBy)
	if sortBy != "" && !slices.Contains(agent.CronSortFields, sortBy) {
		return httpx.Unprocessable("Invalid sort_by field: '%s'. Valid options are: %s", req.SortBy, strings.Join(agent.CronSortFields, ", "))
	}
	if err := oneOf(strings.ToLower(req.SortOrder), "sort_order", "asc", "desc"); err != nil {
		return err
	}
	for _, s := range req.Select {
		if !slices.Contains(cronFields, s) {
			return httpx.Unprocessable("Invalid select field: '%s'. Valid options are: %s", s, strings.Join(cronFields, ", "))
		}
	}
	f := agent.CronFilter{AssistantID: strings.ToLower(req.AssistantID), ThreadID: strings.ToLower(req.ThreadID),
		Enabled: req.Enabled, Metadata: req.Metadata, Limit: req.Limit, Offset: req.Offset, SortBy: sortBy,
		// As the reference: a sort field without an order is descending.
		Desc: !strings.EqualFold(req.SortOrder, "asc")}
	if count {
		// The reference's count ignores paging and enabled.
		f.Limit, f.Offset, f.Enabled = 0, 0, nil
	}
	if count {
		n, err := a.Engine.CountCrons(f)
		return replyCount[agent.Cron](w, true, nil, n, err)
	}
	list, err := a.Engine.FindCrons(f)
	if err != nil || len(req.Select) == 0 {
		return replyCount(w, false, list, 0, err)
	}
	out := make([]map[string]any, 0, len(list))
	for _, c := range list {
		raw, err := json.Marshal(c)
		if err != nil {
			return err
		}
		var all map[string]any
		if err := json.Unmarshal(raw, &all); err != nil {
			return err
		}
		m := map[string]any{}
		for _, s := range req.Select {
			m[s] = all[s]
		}
		out = append(out, m)
	}
	return reply(w)(out, nil)
}
