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
	l.events = append(l.events, StreamEvent{ID: len(l.events) + 1, Event: event, Data: raw})
	close(l.wake)
	l.wake = make(chan struct{})
}

func (l *EventLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.wake)
		close(l.closedC)
	}
}

func (l *EventLog) closedCh() <-chan struct{} { return l.closedC }

// Next returns events after id (waiting for at least one), and whether the
// stream has ended.
func (l *EventLog) Next(ctx context.Context, after int) ([]StreamEvent, bool, error) {
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
