package server

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"syscall"
	"time"

	"slipway/runtime"
)

// How the proxy holds a request whose agent is not there for a moment.
const (
	// agentRestartWait bounds how long a request is held while its
	// deployment's agent does not accept connections: after a crash the
	// process runtime's supervisor restarts it within a second or two, a
	// container's restart policy within a few, the health watcher
	// recreates it after runtime's grace. The request never reached an
	// agent, so holding it is safe; after the wait it is answered 502.
	agentRestartWait = 30 * time.Second
	// redialMaxBackoff caps the pause between two dials of a held request.
	redialMaxBackoff = 250 * time.Millisecond
	// idleCloseWindow is how soon after a handover began a connection
	// reset still counts as the old agent closing its idle keep-alive
	// connections. A stopping agent (http.Server.Shutdown) closes those at
	// once, but lets every request it is handling finish for 5 s before it
	// exits: a reset within this window cannot be one of those.
	idleCloseWindow = 2 * time.Second
	// replayLimit is how much of a request body is kept to send it again
	// on a fresh connection; a larger body is not sent again.
	replayLimit = 1 << 20
)

// redialTransport sends a request to its deployment's agent again when
// the request cannot have reached the agent's handler:
//
//   - the dial was refused (or failed otherwise): a handover stopped the
//     agent just after the request passed the gate, or the agent crashed
//     and is being restarted (a container may come back at another
//     address). The request is held, dialling again with a short back-off
//     and waiting at the gate, until the agent accepts it or
//     agentRestartWait has passed.
//   - a kept-alive connection was reset or closed before any byte of the
//     response, and the agent cannot have handled the request:
//     (a) the agent had closed the connection before the request was
//     written on it (peerClosed, checked as the transport hands the
//     connection out): the agent was killed, or stopped, while the
//     connection was idle; or the agent reset the connection (ECONNRESET):
//     a process that exits or closes a connection with bytes of the
//     request still unread sends a reset (or, when the request was still
//     being written, fails the write: "use of closed network connection"), one that read the whole request
//     (and could have acted on it) a plain close (EOF). An agent's
//     handler reads a request's body before it acts on it, as the agent
//     server and the reference servers do. Every such attempt is sent
//     again;
//     (b) a handover began after the request passed the gate, within
//     idleCloseWindow: the old agent closed the connection as idle while
//     shutting down, which it does only to connections that carry no
//     request it is handling; sent once more;
//     (c) the method is idempotent (GET, HEAD, OPTIONS); sent once more.
//     The next attempt goes to the agent serving then, on a fresh
//     connection, held as above while there is none.
//
// Any other failure (a reset with no handover under way, on a connection
// that was open when the request was written: the agent died while
// handling the request, which a POST must not repeat) is answered 502.
type redialTransport struct {
	p    *proxy
	base http.RoundTripper
}

func (t *redialTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	tg, _ := req.Context().Value(targetKey{}).(target)
	if tg.dep == "" {
		return t.base.RoundTrip(req)
	}
	body := newReplayBody(req.Body)
	deadline := time.Now().Add(cmp.Or(t.p.restartWait, agentRestartWait))
	backoff := 10 * time.Millisecond
	resent := false
	for {
		var reused, closedFirst, unsent bool
		trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
			reused = info.Reused
			closedFirst = info.Reused && peerClosed(info.Conn)
		}, WroteRequest: func(info httptrace.WroteRequestInfo) {
			unsent = info.Err != nil
		}}
		out := req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		out.Body = body.attempt()
		resp, err := t.base.RoundTrip(out)
		if err == nil || req.Context().Err() != nil {
			return resp, err
		}
		switch {
		case isDialError(err) && body.replayable():
			t.p.unreachable.mark(out.URL.Host)
			if rf, ok := t.p.driver.(runtime.Refresher); ok {
				rf.Refresh(tg.dep)
			}
			if !t.pause(req, &backoff, deadline) {
				return nil, err
			}
		case (closedFirst && isClosedByPeer(err) || errors.Is(err, syscall.ECONNRESET) || unsent) && body.replayable():
			// The agent had closed the connection (it died, or it
			// stopped) before the request was written on it, reset it
			// with the request not all read, or closed it before the
			// request was all written: no handler acted on it. Its other
			// idle connections are as dead.
			if ci, ok := t.base.(interface{ CloseIdleConnections() }); ok {
				ci.CloseIdleConnections()
			}
			// Bounded like a refused dial: an agent that resets every
			// request is not asked forever.
			if !t.pause(req, &backoff, deadline) {
				return nil, err
			}
			t.p.log.Debug().Str("deployment_id", tg.dep).Err(err).Msg("sending a request again: the agent had closed the connection")
		case !resent && isClosedByPeer(err) && (idempotent(req.Method) || reused && t.closedAsIdle(tg)) && body.replayable():
			resent = true
			t.p.log.Debug().Str("deployment_id", tg.dep).Err(err).Msg("sending a request again: the old agent closed its idle connection")
		default:
			return nil, err
		}
		if !t.retarget(req, tg.dep, deadline) {
			return nil, err
		}
	}
}

// idempotent methods may be sent twice whatever became of the first.
func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// peerClosed reports whether the agent has closed (or reset) c, as seen
// just before a request is written on it: a non-blocking peek finds the
// end of the stream (or the reset) already queued. An idle keep-alive
// connection has nothing else to read. Control does not take the
// connection's read lock, which the transport's reader holds while it
// waits on the connection.
func peerClosed(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	_ = raw.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = (n == 0 && err == nil) || errors.Is(err, syscall.ECONNRESET)
	})
	return closed
}

// pause waits out the back-off before the next attempt and doubles it;
// false when that would pass the deadline or the client went away.
func (t *redialTransport) pause(req *http.Request, backoff *time.Duration, deadline time.Time) bool {
	if time.Now().Add(*backoff).After(deadline) {
		return false
	}
	select {
	case <-time.After(*backoff):
	case <-req.Context().Done():
		return false
	}
	*backoff = min(2**backoff, redialMaxBackoff)
	return true
}

// closedAsIdle reports whether a handover of the deployment began after
// the request passed the gate, and recently enough that the old agent
// was closing idle connections, not yet cutting requests it handled.
func (t *redialTransport) closedAsIdle(tg target) bool {
	since, ok := t.p.gate.Handover(tg.dep, tg.epoch)
	return ok && time.Since(since) < idleCloseWindow
}

// retarget waits at the gate (a handover may be under way) and points req
// at the endpoint serving the deployment now, waiting for one while an
// agent is being recreated; false when there is none before the deadline.
func (t *redialTransport) retarget(req *http.Request, dep string, deadline time.Time) bool {
	ctx, cancel := context.WithDeadline(req.Context(), deadline)
	defer cancel()
	for {
		if err := t.p.gate.Wait(ctx, dep); err != nil {
			return false
		}
		if endpoint, ok := t.p.endpoint(dep); ok {
			base, token, err := agentURL(endpoint)
			if err != nil {
				return false
			}
			req.URL.Scheme, req.URL.Host = base.Scheme, base.Host
			if token != "" {
				req.Header.Set(runtime.AgentTokenHeader, token)
			}
			req.Host = ""
			return true
		}
		select {
		case <-time.After(redialMaxBackoff):
		case <-ctx.Done():
			return false
		}
	}
}

// isDialError: no connection was made, so nothing was sent.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// isClosedByPeer: the agent reset or closed the connection (as opposed to
// a timeout, or a failure on Slipway's side).
func isClosedByPeer(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "server closed idle connection")
}

// replayBody keeps what the transport read of a request body (up to
// replayLimit), so that the request can be sent again: each attempt reads
// the kept bytes first, then the rest of the original body. The transport
// closes a request's body when a round trip fails; the original is closed
// by the reverse proxy once the request is done, never here.
type replayBody struct {
	mu       sync.Mutex
	src      io.ReadCloser // nil: the request has no body
	kept     []byte
	overflow bool // more than replayLimit was read: no attempt after this one
	eof      error
	gen      int
}

func newReplayBody(src io.ReadCloser) *replayBody {
	if src == http.NoBody {
		src = nil
	}
	return &replayBody{src: src}
}

// attempt is the body of the next attempt; earlier attempts' readers stop
// reading (a transport may still be reading one after its round trip
// failed).
func (b *replayBody) attempt() io.ReadCloser {
	if b.src == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gen++
	return &replayReader{b: b, gen: b.gen}
}

func (b *replayBody) replayable() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.overflow
}

var errSuperseded = errors.New("request body: superseded by a new attempt")

type replayReader struct {
	b   *replayBody
	gen int
	pos int
}

func (r *replayReader) Read(p []byte) (int, error) {
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if r.gen != b.gen {
		return 0, errSuperseded
	}
	if r.pos < len(b.kept) {
		n := copy(p, b.kept[r.pos:])
		r.pos += n
		return n, nil
	}
	if b.eof != nil {
		return 0, b.eof
	}
	// Held under the lock: a new attempt waits for this read, and finds
	// its bytes kept.
	n, err := b.src.Read(p)
	if n > 0 {
		if b.overflow || len(b.kept)+n > replayLimit {
			b.overflow, b.kept = true, nil
		} else {
			b.kept = append(b.kept, p[:n]...)
			r.pos += n
		}
	}
	if err != nil {
		b.eof = err
	}
	return n, err
}

func (r *replayReader) Close() error { return nil }
