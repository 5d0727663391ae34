package agent

import (
	"context"
	"encoding/json"
	"sync"
)

// EventLog is a run's stream: every event in order, replayable from any
// id, with waiters woken on each append.
type EventLog struct {
	mu      sync.Mutex
	events  []StreamEvent
	closed  bool
	wake    chan struct{} // closed and replaced on every append
	closedC chan struct{} // closed once, when the stream ends
	// base is the id before this log's first event: a retried attempt of
	// a run continues the stream its earlier attempt left (runbus.go).
	base int
	// out, when set, copies every event to the run's cross-process
	// stream (Engine.Bus).
	out *streamOut
	// src, when set, is where Next reads: the run's stream on the bus,
	// for a run another process executes (Engine.remoteLog).
	src func(ctx context.Context, after int) ([]StreamEvent, bool, error)
}

// StreamEvent is one server-sent event of a run.
type StreamEvent struct {
	ID    int
	Event string
	Data  json.RawMessage
}

func newEventLog() *EventLog {
	return &EventLog{wake: make(chan struct{}), closedC: make(chan struct{})}
}

func (l *EventLog) publish(event string, data any) {
	raw, err := json.Marshal(data)
	if err != nil {
		raw = []byte(`null`)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	ev := StreamEvent{ID: l.base + len(l.events) + 1, Event: event, Data: raw}
	l.events = append(l.events, ev)
	if l.out != nil {
		l.out.push(ev)
	}
	close(l.wake)
	l.wake = make(chan struct{})
}

func (l *EventLog) close() { l.end(true) }

// end closes the log; with a copy on the bus, it flushes the copy and,
// when endStream, ends the shared stream too (not when the attempt lost
// its claim: the run is another worker's).
func (l *EventLog) end(endStream bool) {
	l.mu.Lock()
	out := l.out
	if !l.closed {
		l.closed = true
		close(l.wake)
		close(l.closedC)
	} else {
		out = nil
	}
	l.mu.Unlock()
	if out != nil {
		out.close(endStream)
	}
}

func (l *EventLog) closedCh() <-chan struct{} { return l.closedC }

// Next returns events after id (waiting for at least one), and whether the
// stream has ended.
func (l *EventLog) Next(ctx context.Context, after int) ([]StreamEvent, bool, error) {
	if l.src != nil {
		return l.src(ctx, after)
	}
	after = max(after-l.base, 0)
	for {
		l.mu.Lock()
		if after < len(l.events) {
			out := append([]StreamEvent(nil), l.events[after:]...)
			l.mu.Unlock()
			return out, false, nil
		}
		if l.closed {
			l.mu.Unlock()
			return nil, true, nil
		}
		wake := l.wake
		l.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
}
