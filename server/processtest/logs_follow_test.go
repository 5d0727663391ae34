package processtest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"slipway/server/servertest"
)

// sseEvent is one server-sent event, or a comment (the heartbeat).
type sseEvent struct {
	ID, Event, Data string
	Comment         bool
	Entry           map[string]any // Data of a "log" event
}

// sseStream is an open event stream read in the background.
type sseStream struct {
	Events chan sseEvent // closed when the stream ends
	Status int
	cancel context.CancelFunc
}

// openSSE opens a stream with the server's key and the extra headers
// (name, value pairs).
func openSSE(t *testing.T, s *servertest.Server, path string, headers ...string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", s.URL+path, nil)
	req.Header.Set("X-Api-Key", s.Key)
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET %s: %v", path, err)
	}
	st := &sseStream{Events: make(chan sseEvent, 10000), Status: resp.StatusCode, cancel: cancel}
	t.Cleanup(st.Close)
	go func() {
		defer close(st.Events)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.Event != "" || ev.Data != "" {
					if ev.Event == "log" {
						_ = json.Unmarshal([]byte(ev.Data), &ev.Entry)
					}
					st.Events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
				st.Events <- sseEvent{Comment: true}
			case strings.HasPrefix(line, "id: "):
				ev.ID = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev.Event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.Data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return st
}

func (st *sseStream) Close() { st.cancel() }

// waitFor reads events until one matches, failing after timeout; seen
// gets every event read on the way.
func (st *sseStream) waitFor(t *testing.T, what string, timeout time.Duration, match func(sseEvent) bool, seen func(sseEvent)) sseEvent {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-st.Events:
			if !ok {
				t.Fatalf("the stream ended before %s", what)
			}
			if seen != nil {
				seen(ev)
			}
			if match(ev) {
				return ev
			}
		case <-deadline:
			t.Fatalf("%s did not come within %s", what, timeout)
		}
	}
}

func logLine(phase, text string) func(sseEvent) bool {
	return func(ev sseEvent) bool {
		return ev.Event == "log" && ev.Entry["phase"] == phase && strings.Contains(ev.Entry["message"].(string), text)
	}
}

// TestFollowLogsLive follows a revision's log over server-sent events
// while it builds and serves on the process runtime: the build command's
// first line arrives while the revision is still BUILDING (its second one
// comes two seconds later), then the deploy lines, then what a command
// graph writes on stderr when a run starts after the deploy, as agent
// output. The stream sends heartbeats, resumes after Last-Event-ID without
// repeating a line, and the same agent output is in the deploy logs the
// official client reads and in the deployment-level follow.
func TestFollowLogsLive(t *testing.T) {
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "process", "SLIPWAY_LOG_HEARTBEAT": "200ms"})
	dep := s.Do("POST", "/v2/deployments", map[string]any{"name": "followed", "source": "internal_source",
		"source_config":          map[string]any{"build_command": "echo build-begins; sleep 2; echo build-ends"},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}, "secrets": []any{}}).Map()["id"].(string)
	rev := deploySource(t, s, dep, appFiles(t, ""))
	base := "/v2/deployments/" + dep + "/revisions/" + rev + "/logs"
	// phase=agent as well: keep following once the revision serves.
	st := openSSE(t, s, base+"?follow=true&phase=build,deploy,agent")
	if st.Status != 200 {
		t.Fatalf("follow: %d", st.Status)
	}
	heartbeats := 0
	count := func(ev sseEvent) {
		if ev.Comment {
			heartbeats++
		}
	}
	begin := st.waitFor(t, "the build's first line", 30*time.Second, logLine("build", "build-begins"), count)
	if status := s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev, nil).Map()["status"]; status != "BUILDING" {
		t.Fatalf("the build's first line arrived when the revision was %v, not while it built", status)
	}
	st.waitFor(t, "the build's second line", 30*time.Second, logLine("build", "build-ends"), count)
	st.waitFor(t, "the deploy's last line", 30*time.Second, logLine("deploy", "now serves the deployment"), count)
	if heartbeats == 0 {
		t.Fatal("no heartbeat while the build slept")
	}

	// The deployment-level follow, opened before the run.
	depStream := openSSE(t, s, "/v2/deployments/"+dep+"/logs?follow=true")
	url := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["url"].(string)
	th := servertest.Do(t, "POST", url+"/threads", map[string]any{}, "X-Api-Key", s.Key).Map()["thread_id"].(string)
	servertest.Do(t, "POST", url+"/threads/"+th+"/runs/wait", map[string]any{"assistant_id": "counter",
		"input": map[string]any{"fail": "stderr-marker-1"}}, "X-Api-Key", s.Key)
	agentLine := func(ev sseEvent) bool {
		return logLine("agent", "stderr-marker-1")(ev) && ev.Entry["stream"] == "stderr" && ev.Entry["revision_id"] == rev
	}
	got := st.waitFor(t, "the command graph's stderr in the revision's stream", 30*time.Second, agentLine, nil)
	if !strings.Contains(got.Entry["message"].(string), "graph counter run ") {
		t.Fatalf("agent line %v does not name its graph", got.Entry)
	}
	depStream.waitFor(t, "the command graph's stderr in the deployment's stream", 30*time.Second, agentLine, nil)

	// Resuming after the build's first line repeats nothing before it and
	// goes on with the next line.
	resumed := openSSE(t, s, base+"?follow=true&phase=build,deploy", "Last-Event-ID", begin.ID)
	first := resumed.waitFor(t, "a line after the resume point", 10*time.Second, func(ev sseEvent) bool { return ev.Event == "log" }, nil)
	if first.Entry["id"].(float64) <= begin.Entry["id"].(float64) {
		t.Fatalf("resumed with line %v, at or before %v", first.Entry, begin.Entry)
	}
	// A revision that is over ends a build and deploy follow.
	end := resumed.waitFor(t, "the end of a finished revision's build and deploy log", 10*time.Second,
		func(ev sseEvent) bool { return ev.Event == "end" }, func(ev sseEvent) {
			if ev.Event == "log" && strings.Contains(ev.Data, "build-begins") {
				t.Fatalf("the resumed stream repeated %s", ev.Data)
			}
		})
	if !strings.Contains(end.Data, "DEPLOYED") {
		t.Fatalf("end event %s", end.Data)
	}

	// The deploy logs the official client reads hold the agent output too,
	// told apart by phase.
	body := s.Do("POST", "/v1/projects/"+dep+"/revisions/"+rev+"/deploy_logs", map[string]any{"query": "stderr-marker-1"}).Map()
	logs := body["logs"].([]any)
	if len(logs) != 1 || logs[0].(map[string]any)["phase"] != "agent" {
		t.Fatalf("deploy_logs: %v", body)
	}
	// A malformed resume point is a 422 naming the header.
	if r := s.Do("GET", base+"?follow=true", nil, "Last-Event-ID", "yesterday"); r.Status != 422 || !strings.Contains(string(r.Body), "Last-Event-ID") {
		t.Fatalf("bad Last-Event-ID: %d %s", r.Status, r.Body)
	}
}

// TestFollowAgentOutputDocker follows a docker deployment's agent output:
// what a command graph writes on stderr in the container reaches the
// deployment's stream through the container's log stream.
func TestFollowAgentOutputDocker(t *testing.T) {
	requireRuntime(t, "docker")
	s := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "docker"})
	dep := s.Do("POST", "/v2/deployments", map[string]any{"name": "followed-docker", "source": "internal_source",
		"source_config":          map[string]any{},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}, "secrets": []any{}}).Map()["id"].(string)
	rev := deploySource(t, s, dep, appFiles(t, ""))
	if st := waitStatus(t, s, dep, rev); st != "DEPLOYED" {
		t.Fatalf("revision ended %s: %s", st, s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev+"/logs", nil).Body)
	}
	st := openSSE(t, s, "/v2/deployments/"+dep+"/logs?follow=true")
	url := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["url"].(string)
	th := servertest.Do(t, "POST", url+"/threads", map[string]any{}, "X-Api-Key", s.Key).Map()["thread_id"].(string)
	servertest.Do(t, "POST", url+"/threads/"+th+"/runs/wait", map[string]any{"assistant_id": "counter",
		"input": map[string]any{"fail": "docker-stderr-marker"}}, "X-Api-Key", s.Key)
	st.waitFor(t, "the command graph's stderr", 30*time.Second, func(ev sseEvent) bool {
		return logLine("agent", "docker-stderr-marker")(ev) && ev.Entry["stream"] == "stderr" && ev.Entry["revision_id"] == rev
	}, nil)
	if r := s.Do("DELETE", "/v2/deployments/"+dep, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	end := st.waitFor(t, "the end of the deployment's stream", 60*time.Second, func(ev sseEvent) bool { return ev.Event == "end" }, nil)
	if !strings.Contains(end.Data, "DELETED") {
		t.Fatalf("end event %s", end.Data)
	}
}
