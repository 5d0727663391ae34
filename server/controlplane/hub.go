package controlplane

import "sync"

// hub fans committed log lines out to the clients following them. Writers
// never wait for a reader: each subscriber has a bounded queue, and one
// that falls behind is dropped rather than slowing the log writer; the
// follower then catches up from the database, where every line it was
// sent was committed first.
//
// A subscriber's queue holds only the lines it has not taken yet and is
// released each time it takes them: an idle follower costs a few hundred
// bytes, not a preallocated buffer of its bound (a channel of 512 lines
// was 64 KiB per follower whether any line came or not, which is most of
// what thousands of followers held).
type hub struct {
	mu     sync.Mutex
	topics map[string]map[*subscription]struct{}
}

// subscription receives the lines published to its topics.
type subscription struct {
	// Ready holds a token when lines are waiting or the subscription was
	// dropped: wait on it, then Take.
	Ready  chan struct{}
	h      *hub
	topics []string
	limit  int
	queue  []LogEntry // under h.mu
	bytes  int        // of the queued lines' messages, under h.mu
	closed bool       // under h.mu
}

// subscriberBuffer is how many lines a follower may lag behind before it is
// dropped and has to catch up from the database; subscriberBytes bounds
// their messages (agent lines may be 16 KiB each), so that a follower
// whose client does not read holds at most this much here.
const (
	subscriberBuffer = 512
	subscriberBytes  = 256 << 10
)

// revisionTopic carries a revision's build and deploy lines;
// deploymentTopic carries the agent output of every revision of a deployment.
func revisionTopic(rev string) string   { return "rev:" + rev }
func deploymentTopic(dep string) string { return "dep:" + dep }

// Subscribe starts receiving lines published to any of topics from now on;
// more than limit lines not yet taken drop the subscription.
func (h *hub) Subscribe(limit int, topics ...string) *subscription {
	s := &subscription{Ready: make(chan struct{}, 1), h: h, topics: topics, limit: limit}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.topics == nil {
		h.topics = map[string]map[*subscription]struct{}{}
	}
	for _, t := range topics {
		if h.topics[t] == nil {
			h.topics[t] = map[*subscription]struct{}{}
		}
		h.topics[t][s] = struct{}{}
	}
	return s
}

// Publish hands entries to every subscriber of topic without blocking.
func (h *hub) Publish(topic string, entries ...LogEntry) {
	if len(entries) == 0 {
		return
	}
	size := 0
	for _, e := range entries {
		size += len(e.Message)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.topics[topic] {
		if len(s.queue)+len(entries) > s.limit || s.bytes+size > subscriberBytes {
			h.dropLocked(s)
			continue
		}
		s.queue = append(s.queue, entries...)
		s.bytes += size
		s.signal()
	}
}

func (s *subscription) signal() {
	select {
	case s.Ready <- struct{}{}:
	default: // a token is already waiting
	}
}

// Take returns the lines waiting, oldest first, and gives up the queue's
// memory; ok is false once the subscription was dropped (or closed), when
// the lines it missed must be read from the database.
func (s *subscription) Take() (lines []LogEntry, ok bool) {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	if s.closed {
		return nil, false
	}
	lines, s.queue, s.bytes = s.queue, nil, 0
	return lines, true
}

// pending counts the lines waiting (for tests).
func (s *subscription) pending() int {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	return len(s.queue)
}

// Close unsubscribes; it may be called more than once.
func (s *subscription) Close() {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	s.h.dropLocked(s)
}

func (h *hub) dropLocked(s *subscription) {
	if s.closed {
		return
	}
	s.closed = true
	s.queue, s.bytes = nil, 0
	for _, t := range s.topics {
		delete(h.topics[t], s)
		if len(h.topics[t]) == 0 {
			delete(h.topics, t)
		}
	}
	s.signal()
}

// subscribers counts the live subscriptions of a topic (for tests).
func (h *hub) subscribers(topic string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.topics[topic])
}
