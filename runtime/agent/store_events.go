package agent

import "sync"

// storeEvent tells subscribers that a unit of work committed a run's
// change: a run admitted to its thread (eventRunQueued: replicas other
// than the one that admitted it may dispatch it), or a run's record
// written or deleted (eventRunChanged: its status, "" when deleted, for
// those waiting on it).
type storeEvent struct {
	Kind   string
	Thread string
	Run    string
	Status string
}

const (
	eventRunQueued  = "run_queued"
	eventRunChanged = "run_changed"
)

// eventSource is the Store's notification hook. Events are delivered
// after the unit of work that caused them is durable, in its order, and
// never for one that failed; a PostgreSQL store delivers other replicas'
// too (LISTEN/NOTIFY). fn runs on the committing goroutine and must not
// block on the store.
type eventSource interface {
	// Subscribe registers fn until the returned function is called.
	Subscribe(fn func(storeEvent)) (unsubscribe func())
}

// subscribers is the bbolt store's in-process hook.
type subscribers struct {
	mu   sync.Mutex
	next int
	fns  map[int]func(storeEvent)
}

func (s *subscribers) Subscribe(fn func(storeEvent)) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fns == nil {
		s.fns = map[int]func(storeEvent){}
	}
	id := s.next
	s.next++
	s.fns[id] = fn
	return func() {
		s.mu.Lock()
		delete(s.fns, id)
		s.mu.Unlock()
	}
}

func (s *subscribers) publish(events []storeEvent) {
	if len(events) == 0 {
		return
	}
	s.mu.Lock()
	fns := make([]func(storeEvent), 0, len(s.fns))
	for _, fn := range s.fns {
		fns = append(fns, fn)
	}
	s.mu.Unlock()
	for _, ev := range events {
		for _, fn := range fns {
			fn(ev)
		}
	}
}

func (t *boltTx) note(ev storeEvent) { t.events = append(t.events, ev) }
