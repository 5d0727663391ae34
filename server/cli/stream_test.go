package cli

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestStreamerFollows drives Streamer against servers that behave as a
// follow-mode logs endpoint does, and as one without that mode.
func TestStreamerFollows(t *testing.T) {
	line := func(id int, phase, msg string) string {
		return fmt.Sprintf("id: c%d\nevent: log\ndata: {\"id\": %d, \"phase\": %q, \"message\": %q}\n\n", id, id, phase, msg)
	}
	tests := []struct {
		name     string
		after    int64
		answers  []string // one per connection; "" answers JSON (no follow mode)
		wantLast []string // Last-Event-ID of each connection
		want     string   // the lines received
		status   string
	}{
		{name: "to the end", answers: []string{
			": keep-alive\n\n" + line(1, "build", "one") + line(2, "deploy", "two") + "event: end\ndata: {\"status\": \"DEPLOYED\"}\n\n"},
			wantLast: []string{""}, want: "one,two", status: "DEPLOYED"},
		{name: "resumes after an early close", answers: []string{
			line(1, "build", "one"),
			line(2, "build", "two") + "event: end\ndata: {\"status\": \"BUILD_FAILED\"}\n\n"},
			wantLast: []string{"", "c1"}, want: "one,two", status: "BUILD_FAILED"},
		{name: "after skips build lines but not agent lines", after: 1, answers: []string{
			line(1, "build", "old") + line(1, "agent", "agent one") + line(2, "deploy", "new") + "event: end\ndata: {\"status\": \"DEPLOYED\"}\n\n"},
			wantLast: []string{""}, want: "agent one,new", status: "DEPLOYED"},
		{name: "falls back to polling", answers: []string{""},
			wantLast: []string{""}, want: "polled", status: "DEPLOYED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var lasts []string
			conn := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !strings.Contains(r.URL.Path, "/logs") {
					fmt.Fprint(w, `{"id": "r", "status": "BUILDING"}`)
					return
				}
				mu.Lock()
				answer := tt.answers[min(conn, len(tt.answers)-1)]
				if r.URL.Query().Get("follow") == "true" {
					lasts = append(lasts, r.Header.Get("Last-Event-ID"))
					conn++
				}
				mu.Unlock()
				if answer == "" {
					w.Header().Set("Content-Type", "application/json")
					fmt.Fprint(w, `{"logs": [{"id": 1, "phase": "build", "message": "polled"}], "status": "DEPLOYED"}`)
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				fmt.Fprint(w, answer)
			}))
			defer srv.Close()
			var got []string
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			st, err := (&Streamer{Client: &Client{BaseURL: srv.URL}}).Follow(ctx, "d", "r", FollowOptions{
				After: tt.after, Entry: func(e LogEntry) { got = append(got, e.Message) }})
			if err != nil {
				t.Fatal(err)
			}
			if st != tt.status || strings.Join(got, ",") != tt.want {
				t.Fatalf("status %q lines %q, want %q %q", st, got, tt.status, tt.want)
			}
			if fmt.Sprint(lasts) != fmt.Sprint(tt.wantLast) {
				t.Fatalf("Last-Event-ID per connection %q, want %q", lasts, tt.wantLast)
			}
		})
	}
}

// TestPollerKeepsAgentLines: agent lines are numbered apart from build and
// deploy lines, so a low agent id after higher build ids is still new.
func TestPollerKeepsAgentLines(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"logs": [{"id": 1, "phase": "build", "message": "b1"}, {"id": 2, "phase": "deploy", "message": "d2"},
			{"id": 1, "phase": "agent", "message": "a1"}, {"id": 3, "phase": "deploy", "message": "d3"}], "status": "DEPLOYED"}`)
	}))
	defer srv.Close()
	var got []string
	st, err := (&Poller{Client: &Client{BaseURL: srv.URL}}).Follow(context.Background(), "d", "r",
		FollowOptions{Entry: func(e LogEntry) { got = append(got, e.Message) }})
	if err != nil || st != "DEPLOYED" || strings.Join(got, ",") != "b1,d2,a1,d3" {
		t.Fatalf("status %q err %v lines %q", st, err, got)
	}
}

// TestProgressStepsInOrder: a build quick enough to end before the follow
// starts still shows its steps in order, from either follower. The status
// read first is already DEPLOYING; the build's lines come after it.
func TestProgressStepsInOrder(t *testing.T) {
	const lines = `[{"id": 1, "phase": "build", "message": "b1"}, {"id": 2, "phase": "deploy", "message": "d2"}]`
	for _, follower := range []string{"stream", "poll"} {
		t.Run(follower, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case !strings.Contains(r.URL.Path, "/logs"):
					fmt.Fprint(w, `{"id": "r", "status": "DEPLOYING"}`)
				case follower == "stream":
					w.Header().Set("Content-Type", "text/event-stream")
					fmt.Fprint(w, "id: c1\nevent: log\ndata: {\"id\": 1, \"phase\": \"build\", \"message\": \"b1\"}\n\n"+
						"id: c2\nevent: log\ndata: {\"id\": 2, \"phase\": \"deploy\", \"message\": \"d2\"}\n\n"+
						"event: end\ndata: {\"status\": \"DEPLOYED\"}\n\n")
				default:
					fmt.Fprint(w, `{"logs": `+lines+`, "status": "DEPLOYING"}`)
				}
			}))
			defer srv.Close()
			var out strings.Builder
			p := newProgress(&out, false, "test")
			var f LogFollower = &Streamer{Client: &Client{BaseURL: srv.URL}}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if follower == "poll" {
				// One read: the poller stops once the status is final, so
				// this one reads DEPLOYING, then the context ends it.
				f = &Poller{Client: &Client{BaseURL: srv.URL}, Interval: time.Hour}
				ctx, cancel = context.WithTimeout(ctx, 500*time.Millisecond)
				defer cancel()
			}
			f.Follow(ctx, "d", "r", FollowOptions{Status: p.Status, Entry: p.Entry})
			p.Close()
			var steps []string
			for _, l := range strings.Split(out.String(), "\n") {
				if i := strings.Index(l, "] "); i > 0 {
					steps = append(steps, l[i+2:])
				}
			}
			want := []string{"step 2/3: building (BUILDING)", "step 3/3: deploying (DEPLOYING)"}
			if follower == "stream" {
				want = append(want, "deployed (DEPLOYED)")
			}
			if fmt.Sprint(steps) != fmt.Sprint(want) {
				t.Fatalf("steps %q, want %q\n%s", steps, want, out.String())
			}
		})
	}
}
