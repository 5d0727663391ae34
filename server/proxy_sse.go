package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
)

// sseGuard ends a relayed event stream that the agent broke off (its
// process was killed, its container removed) with an `error` event, the
// way the agent itself ends a run that failed, instead of cutting the
// client's connection: an SDK surfaces the event to its caller, where a
// cut connection reads as a stream that simply ended, or as a transport
// error the caller cannot tell from a network fault. The run's own state
// is the agent's; the event says only that the stream was lost.
type sseGuard struct {
	body io.ReadCloser
	// last holds the final two bytes relayed: an event ends with a blank
	// line, so a stream cut mid-event gets one before the error event.
	last  [2]byte
	n     int
	tail  *bytes.Reader // the error event, once the agent's stream broke
	close func() error
}

// guardEventStream wraps resp's body when it is an event stream. A
// resumable stream (stream_resumable: the agent sent a Location to
// reconnect to) is left alone: there an SDK reconnects after a drop and
// resumes from the last event id, which an error event would prevent.
func guardEventStream(resp *http.Response) {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "text/event-stream" || resp.Body == nil || resp.Body == http.NoBody || resp.Header.Get("Location") != "" {
		return
	}
	resp.Body = &sseGuard{body: resp.Body, close: resp.Body.Close}
}

func (g *sseGuard) Read(p []byte) (int, error) {
	if g.tail != nil {
		return g.tail.Read(p)
	}
	n, err := g.body.Read(p)
	if n > 0 {
		switch {
		case n >= 2:
			g.last = [2]byte{p[n-2], p[n-1]}
		default:
			g.last = [2]byte{g.last[1], p[0]}
		}
		g.n += n
	}
	if err == nil || errors.Is(err, io.EOF) {
		return n, err
	}
	var ev bytes.Buffer
	if g.n > 0 && g.last != [2]byte{'\n', '\n'} {
		ev.WriteString("\n\n")
	}
	data, _ := json.Marshal(map[string]string{"error": "AgentUnavailable",
		"message": "The deployment's agent server stopped while streaming; the stream is incomplete (the run's state is on the thread)."})
	ev.WriteString("event: error\ndata: ")
	ev.Write(data)
	ev.WriteString("\n\n")
	g.tail = bytes.NewReader(ev.Bytes())
	if n > 0 {
		return n, nil
	}
	return g.tail.Read(p)
}

func (g *sseGuard) Close() error { return g.close() }
