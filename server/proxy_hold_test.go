package server

import (
	"bufio"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"slipway/runtime"
	"slipway/server/servertest"
)

// movableDriver serves one deployment, "dep", at an endpoint the test
// moves.
type movableDriver struct {
	unavailable
	mu       sync.Mutex
	endpoint string
}

func (d *movableDriver) Endpoint(string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.endpoint, d.endpoint != ""
}

func (d *movableDriver) move(endpoint string) {
	d.mu.Lock()
	d.endpoint = endpoint
	d.mu.Unlock()
}

// holdRelay is a server relaying every request to deployment "dep" the
// way proxy.serve does once the gate let it pass.
func holdRelay(t *testing.T, p *proxy) *httptest.Server {
	t.Helper()
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		epoch, err := p.gate.Pass(r.Context(), "dep")
		if err != nil {
			t.Error(err)
			return
		}
		endpoint, _ := p.driver.Endpoint("dep")
		base, _, _ := agentURL(endpoint)
		if err := p.relay(w, r, target{dep: "dep", base: base, path: r.URL.Path, epoch: epoch}); err != nil {
			t.Error(err)
		}
	}))
	// The server's own log: net/http logs a panic in a connection's
	// goroutine there (golang/go#68560, a full-duplex request whose body
	// was left unread) and drops the client's kept-alive connection.
	var serverLog servertest.SyncBuffer
	s.Config.ErrorLog = log.New(&serverLog, "", 0)
	s.Start()
	t.Cleanup(func() {
		s.Close() // waits for every connection to end
		if l := serverLog.String(); strings.Contains(l, "panic") {
			t.Errorf("the relay's server panicked:\n%s", l)
		}
	})
	return s
}

// echoAgent answers every request with its method and body.
var echoAgent = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	fmt.Fprintf(w, "%s %s", r.Method, b)
})

// TestProxyHoldsRequestsWhileTheAgentRestarts: the agent was killed and
// its supervisor brings it back on the same address a second later. A run
// creation (a POST with a body) arriving meanwhile is held and reaches the
// agent once it is back; held longer than the bound, a request is
// answered 502. With keptAlive, the proxy had a keep-alive connection to
// the agent when it was killed: the request may be written on that dead
// connection before the transport notices, and is sent again. On cb5b11d
// the proxy dialled three times within milliseconds and answered 502
// "connect: connection refused" (or "EOF", on the dead connection).
func TestProxyHoldsRequestsWhileTheAgentRestarts(t *testing.T) {
	cases := []struct {
		name       string
		keptAlive  bool
		downFor    time.Duration
		wait       time.Duration
		wantStatus int
	}{
		{"back within the bound", false, 1200 * time.Millisecond, 10 * time.Second, http.StatusOK},
		{"killed with a kept-alive connection", true, 1200 * time.Millisecond, 10 * time.Second, http.StatusOK},
		{"not back within the bound", false, 3 * time.Second, time.Second, http.StatusBadGateway},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			d := &movableDriver{endpoint: "http://" + addr}
			p := &proxy{driver: d, gate: &runtime.Gate{}, handoverWait: 10 * time.Second, restartWait: tc.wait, log: zerolog.Nop()}
			relay := holdRelay(t, p)
			if tc.keptAlive {
				first := &http.Server{Handler: echoAgent}
				go first.Serve(ln)
				resp, err := http.Post(relay.URL+"/threads", "application/json", strings.NewReader(`{}`))
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				first.Close() // killed: its listener and connections close
			} else {
				ln.Close() // the agent is down: its port refuses connections
			}

			restarted := make(chan *http.Server, 1)
			go func() {
				time.Sleep(tc.downFor)
				ln, err := net.Listen("tcp", addr)
				if err != nil {
					t.Error(err)
					restarted <- nil
					return
				}
				srv := &http.Server{Handler: echoAgent}
				go srv.Serve(ln)
				restarted <- srv
			}()
			t.Cleanup(func() {
				if srv := <-restarted; srv != nil {
					srv.Close()
				}
			})
			start := time.Now()
			resp, err := http.Post(relay.URL+"/threads/t/runs", "application/json", strings.NewReader(`{"assistant_id":"agent"}`))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d after %v, want %d: %s", resp.StatusCode, time.Since(start).Round(time.Millisecond), tc.wantStatus, body)
			}
			if tc.wantStatus == http.StatusOK && string(body) != `POST {"assistant_id":"agent"}` {
				t.Fatalf("the agent got %q", body)
			}
			if tc.wantStatus != http.StatusOK && time.Since(start) > tc.wait+time.Second {
				t.Fatalf("held for %v, bound %v", time.Since(start), tc.wait)
			}
		})
	}
}

// closingAgent is an agent that answers the first request on a
// connection and then closes the connection under the next request
// without answering: with unread, before reading any of it (the kernel
// then resets the connection), otherwise after reading all of it (a
// plain close: the agent could have acted on it). onSecond runs just
// before the close.
func closingAgent(t *testing.T, unread bool, onSecond func()) (addr string, handled *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	handled = &atomic.Int32{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				br := bufio.NewReader(c)
				for i := 0; ; i++ {
					if i == 1 && unread {
						for !pending(c) {
							time.Sleep(time.Millisecond)
						}
						onSecond()
						return
					}
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					b, _ := io.ReadAll(req.Body)
					if i == 1 {
						onSecond()
						return
					}
					handled.Add(1)
					fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
				}
			}(c)
		}
	}()
	return ln.Addr().String(), handled
}

// pending reports whether bytes wait on c, without reading them.
func pending(c net.Conn) bool {
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	raw.Control(func(fd uintptr) {
		var b [1]byte
		n, _, _ = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	})
	return n > 0
}

// TestProxyResendsWhatTheAgentCannotHaveHandled: a run creation sent on a
// kept-alive connection that the agent closes without answering.
//   - During a handover the old agent closes its idle keep-alive
//     connections: a request just sent on one never reached a handler.
//   - An agent that dies with the request unread resets the connection.
//
// Both are sent once more, on a fresh connection, to the agent serving
// then. An agent that read the request and then died (a plain close, no
// handover under way) may have acted on it: answered 502, not sent again,
// as a POST must not be repeated. On cb5b11d all three were answered 502
// ("EOF", "read: connection reset by peer").
func TestProxyResendsWhatTheAgentCannotHaveHandled(t *testing.T) {
	cases := []struct {
		name       string
		handover   bool
		unread     bool
		wantStatus int
		wantNew    int32 // requests the new agent gets
	}{
		{"closed as idle by a handover", true, false, http.StatusOK, 1},
		{"reset with the request unread", false, true, http.StatusOK, 1},
		{"closed after reading it, no handover", false, false, http.StatusBadGateway, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gate := &runtime.Gate{}
			var newAgent atomic.Int32
			next := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				newAgent.Add(1)
				echoAgent(w, r)
			}))
			defer next.Close()
			d := &movableDriver{}
			old, handled := closingAgent(t, tc.unread, func() {
				if tc.handover {
					resume := gate.Pause("dep")
					time.AfterFunc(200*time.Millisecond, resume)
				}
				d.move(next.URL)
			})
			d.move("http://" + old)
			p := &proxy{driver: d, gate: gate, handoverWait: 10 * time.Second, log: zerolog.Nop()}
			relay := holdRelay(t, p)

			post := func(body string) (int, string) {
				resp, err := http.Post(relay.URL+"/threads/t/runs", "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			if st, b := post(`{"n":1}`); st != http.StatusOK {
				t.Fatalf("first run: %d %s", st, b)
			}
			st, b := post(`{"n":2}`)
			if st != tc.wantStatus {
				t.Fatalf("second run: %d %s, want %d", st, b, tc.wantStatus)
			}
			if tc.wantStatus == http.StatusOK && b != `POST {"n":2}` {
				t.Fatalf("the new agent got %q", b)
			}
			if n := newAgent.Load(); n != tc.wantNew {
				t.Fatalf("the new agent got %d requests, want %d", n, tc.wantNew)
			}
			if n := handled.Load(); n != 1 {
				t.Fatalf("the old agent handled %d requests, want 1", n)
			}
		})
	}
}

// TestProxyEndsABrokenEventStreamWithAnError: the agent's process dies in
// the middle of a streamed run. The client gets the events relayed so far,
// then an `error` event, and a stream that ends cleanly: an SDK surfaces
// the error to its caller. On cb5b11d the client's connection was cut
// ("unexpected EOF"), which an SDK either raises as a network fault or
// reads as a stream that ended. A resumable stream (with a Location) is
// still cut: the SDK reconnects to it and resumes.
func TestProxyEndsABrokenEventStreamWithAnError(t *testing.T) {
	cases := []struct {
		name, sent string
		resumable  bool
	}{
		{"between events", "event: metadata\ndata: {\"run_id\":\"r\"}\n\n", false},
		{"within an event", "event: metadata\ndata: {\"run_id\":\"r\"}\n\nevent: values\ndata: {\"partial", false},
		{"resumable", "event: metadata\ndata: {\"run_id\":\"r\"}\n\n", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				if tc.resumable {
					w.Header().Set("Location", "/threads/t/runs/r/stream")
				}
				w.WriteHeader(http.StatusOK)
				io.WriteString(w, tc.sent)
				http.NewResponseController(w).Flush()
				c, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					c.(*net.TCPConn).SetLinger(0)
					c.Close() // killed: no end of the chunked body
				}
			}))
			defer agent.Close()
			d := &movableDriver{endpoint: agent.URL}
			p := &proxy{driver: d, gate: &runtime.Gate{}, handoverWait: time.Second, log: zerolog.Nop()}
			relay := holdRelay(t, p)
			resp, err := http.Post(relay.URL+"/threads/t/runs/stream", "application/json", strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if tc.resumable {
				if err == nil {
					t.Fatalf("a resumable stream was ended, not cut: %q", b)
				}
				return
			}
			if err != nil {
				t.Fatalf("the stream was cut: %v after %q", err, b)
			}
			if !strings.HasPrefix(string(b), "event: metadata\ndata: {\"run_id\":\"r\"}\n\n") {
				t.Fatalf("the events before the break were not relayed: %q", b)
			}
			// Parsed as an SSE client does: events end at a blank line.
			events := strings.Split(strings.TrimSuffix(string(b), "\n\n"), "\n\n")
			last := events[len(events)-1]
			if !strings.HasPrefix(last, "event: error\ndata: {") || !strings.Contains(last, `"error":"AgentUnavailable"`) {
				t.Fatalf("the stream does not end with an error event: %q", b)
			}
		})
	}
}

// TestProxyGivesUpOnAnAgentThatResetsEverything: an agent that resets
// every request unread is asked again with a back-off, and the caller is
// answered 502 once the bound has passed, not held forever.
func TestProxyGivesUpOnAnAgentThatResetsEverything(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				for deadline := time.Now().Add(2 * time.Second); !pending(c) && time.Now().Before(deadline); {
					time.Sleep(time.Millisecond)
				}
				c.Close() // unread: a reset
			}()
		}
	}()
	d := &movableDriver{endpoint: "http://" + ln.Addr().String()}
	p := &proxy{driver: d, gate: &runtime.Gate{}, handoverWait: time.Second, restartWait: time.Second, log: zerolog.Nop()}
	relay := holdRelay(t, p)
	start := time.Now()
	resp, err := http.Post(relay.URL+"/threads", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	took := time.Since(start)
	if resp.StatusCode != http.StatusBadGateway || took > 2*time.Second {
		t.Fatalf("status %d after %v, want 502 within the 1 s bound", resp.StatusCode, took)
	}
	if n := conns.Load(); n < 2 || n > 20 {
		t.Fatalf("%d connections in %v: want a few, with a back-off", n, took)
	}
}
