package agentapi

// Server-sent events: the one place that writes SSE frames, for streamed
// runs (POST .../runs/stream) and for joining a run's stream later.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"slipway/runtime/agent"
)

// stream writes the run's events as server-sent events: metadata first,
// then the requested modes, `error` on failure; it ends with the run.
func (a *API) stream(w http.ResponseWriter, r *http.Request, run agent.Run, log *agent.EventLog, modes []string, after int, cancelOnDisconnect bool) error {
	want := map[string]bool{"metadata": true, "error": true}
	for _, m := range modes {
		if m == "messages-tuple" {
			m = "messages"
		}
		want[m] = true
	}
	defer a.Engine.Metrics.StreamOpened()()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	flush()
	// A run that ended long ago has no log: nothing to replay.
	a.follow(r, run, log, after, cancelOnDisconnect, func(evs []agent.StreamEvent) bool {
		for _, ev := range evs {
			if !want[baseMode(ev.Event)] {
				continue
			}
			if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\nid: %d\n\n", ev.Event, ev.Data, ev.ID); err != nil {
				return false
			}
		}
		flush()
		return true
	})
	return nil
}

// follow hands fn a run's events after the id after, batch by batch, until
// the run ends (true), fn returns false, or the client goes away (false;
// the run is cancelled first when cancelOnDisconnect). A nil log is a run
// that has ended.
func (a *API) follow(r *http.Request, run agent.Run, log *agent.EventLog, after int, cancelOnDisconnect bool, fn func([]agent.StreamEvent) bool) bool {
	for log != nil {
		evs, done, err := log.Next(r.Context(), after)
		if err != nil {
			if cancelOnDisconnect {
				_ = a.Engine.Cancel(context.Background(), run.ThreadID, run.RunID, agent.StrategyInterrupt,
					"client disconnected from the run stream (on_disconnect=cancel)", false)
			}
			return false
		}
		if done {
			return true
		}
		after = evs[len(evs)-1].ID
		if !fn(evs) {
			return false
		}
	}
	return true
}

// joinStream: GET /threads/{id}/runs/{rid}/stream, resuming after
// Last-Event-ID when given.
func (a *API) joinStream(w http.ResponseWriter, r *http.Request, t, rid string) error {
	run, err := a.Engine.GetRun(t, rid)
	if err != nil {
		return err
	}
	// After the event Last-Event-ID names; -1 is the SDK's "from the
	// beginning", and so is an id this stream never sent (another
	// server's, a proxy's): as the reference, a client that cannot be
	// resumed where it was gets the whole stream again, not an error.
	after := 0
	if n, err := strconv.Atoi(r.Header.Get("Last-Event-ID")); err == nil && n > 0 {
		after = n
	}
	modes := streamModes(r.URL.Query()["stream_mode"])
	if len(modes) == 0 {
		modes = []string{"values", "updates", "messages", "custom"}
	}
	cancel := r.URL.Query().Get("cancel_on_disconnect")
	return a.stream(w, r, run, a.Engine.Subscribe(rid), modes, after, cancel == "1" || strings.EqualFold(cancel, "true"))
}

// baseMode is the stream mode an event belongs to: "messages/partial" and
// "updates|child:1" (a subgraph's) count as "messages" and "updates".
func baseMode(event string) string {
	if i := strings.IndexAny(event, "|/"); i >= 0 {
		return event[:i]
	}
	return event
}

// streamModes reads stream_mode query parameters: repeated
// (?stream_mode=a&stream_mode=b) or, as the JS SDK sends a list, one
// parameter holding a JSON array (?stream_mode=["a","b"]). The Python SDK
// sends stream_mode= (empty) when the caller names no mode: that is no
// filter, like an absent parameter.
func streamModes(vals []string) []string {
	var out []string
	for _, v := range vals {
		var list []string
		if strings.HasPrefix(strings.TrimSpace(v), "[") && json.Unmarshal([]byte(v), &list) == nil {
			out = append(out, list...)
			continue
		}
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}
