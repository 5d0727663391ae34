package controlplane

import "sync"

// hub fans committed log lines out to the clients following them. Writers
// never wait for a reader: each subscriber has a bounded buffer, and one
// that falls behind is dropped (its channel closed) rather than slowing the
// log writer; the follower then catches up from the database, where every
// line it was sent was committed first.
type hub struct {
	mu     sync.Mutex
	topics map[string]map[*subscription]struct{}
}

// subscription receives the lines published to its topics.
type subscription struct {
	C      chan LogEntry
	h      *hub
	topics []string
	closed bool // under h.mu
}

// subscriberBuffer is how many lines a follower may lag behind before it is
// dropped and has to catch up from the database.
const subscriberBuffer = 512

// revisionTopic carries a revision's build and deploy lines;
// deploymentTopic carries the agent output of every revision of a deployment.
func revisionTopic(rev string) string   { return "rev:" + rev }
func deploymentTopic(dep string) string { return "dep:" + dep }

// Subscribe starts receiving lines published to any of topics from now on.
func (h *hub) Subscribe(size int, topics ...string) *subscription {
	s := &subscription{C: make(chan LogEntry, size), h: h, topics: topics}
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
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.topics[topic] {
		for _, e := range entries {
			select {
			case s.C <- e:
			default:
				h.dropLocked(s)
			}
			if s.closed {
				break
			}
		}
	}
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
	for _, t := range s.topics {
		delete(h.topics[t], s)
		if len(h.topics[t]) == 0 {
			delete(h.topics, t)
		}
	}
	close(s.C)
}

// subscribers counts the live subscriptions of a topic (for tests).
func (h *hub) subscribers(topic string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.topics[topic])
}
