package agentapi_test

import (
	"bufio"
	"net/http"
	"strings"
	"testing"

	"slipway/server/servertest"
)

// TestJoinStreamUnknownLastEventID: a Last-Event-ID this stream never sent
// (another server's, garbage) replays the run's stream from the beginning,
// as the reference does, instead of refusing the reconnect.
func TestJoinStreamUnknownLastEventID(t *testing.T) {
	a := servertest.StartAgent(t, nil)
	th := newThread(t, a)
	r := a.Do("POST", "/threads/"+th+"/runs/wait", map[string]any{"assistant_id": "echo", "stream_resumable": true,
		"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": "again"}}}})
	if r.Status != 200 {
		t.Fatalf("run: %d %s", r.Status, r.Body)
	}
	runs := a.Do("GET", "/threads/"+th+"/runs", nil).JSON().([]any)
	rid := runs[0].(map[string]any)["run_id"].(string)
	count := func(lastID string) int {
		req, _ := http.NewRequest("GET", a.URL+"/threads/"+th+"/runs/"+rid+"/stream", nil)
		req.Header.Set("Last-Event-ID", lastID)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("join with Last-Event-ID %q: %d", lastID, resp.StatusCode)
		}
		n := 0
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "event: values") {
				n++
			}
		}
		return n
	}
	all := count("-1")
	if all == 0 {
		t.Fatal("the replay from the beginning has no values event")
	}
	for _, id := range []string{"not-an-id", "1733000000000-0", ""} {
		if got := count(id); got != all {
			t.Errorf("Last-Event-ID %q: %d values events, want the whole stream's %d", id, got, all)
		}
	}
}
