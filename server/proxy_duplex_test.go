package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestRelayIsFullDuplex: the agent may answer before the request body has
// all arrived (a streamed run that starts at once, an upload reporting
// its progress) and go on reading it. The relay must leave the body to
// the agent: a server that drains and closes it once the response starts
// either waits for the client's remaining bytes before the agent's first
// line can pass (this test's client waits for that line: a deadlock), or
// cuts the body under the transport still sending it, which closes the
// agent's connection mid-response.
func TestRelayIsFullDuplex(t *testing.T) {
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			t.Error(err)
		}
		br := bufio.NewReader(r.Body)
		first, _ := br.ReadString('\n')
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: got %s\n", first)
		http.NewResponseController(w).Flush()
		rest, err := io.ReadAll(br)
		fmt.Fprintf(w, "data: then %d bytes (%v)\n\n", len(rest), err)
	}))
	defer agent.Close()
	base, _ := url.Parse(agent.URL)
	p := &proxy{handoverWait: time.Second}
	relay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := p.relay(w, r, target{base: base, path: "/upload"}); err != nil {
			t.Error(err)
		}
	}))
	defer relay.Close()

	// Deferred after relay.Close, so run before it: a failing relay is
	// unblocked, not waited for.
	body, send := io.Pipe()
	defer send.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", relay.URL+"/upload", body)
	go fmt.Fprint(send, "first part\n") // a pipe write waits for the transport's read
	type result struct {
		resp *http.Response
		err  error
	}
	got := make(chan result, 1)
	go func() { r, err := http.DefaultClient.Do(req); got <- result{r, err} }()
	var res result
	select {
	case res = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the agent's answer did not start while the request body was still open")
	}
	if res.err != nil {
		t.Fatal(res.err)
	}
	defer res.resp.Body.Close()
	lines := bufio.NewReader(res.resp.Body)
	line, err := lines.ReadString('\n')
	if err != nil || line != "data: got first part\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	// Only now the rest of the body: the agent answered before it came.
	fmt.Fprint(send, strings.Repeat("x", 100<<10))
	send.Close()
	rest, err := io.ReadAll(lines)
	if err != nil || !strings.Contains(string(rest), fmt.Sprintf("then %d bytes (<nil>)", 100<<10)) {
		t.Fatalf("the rest of the answer: %q, %v", rest, err)
	}
}
