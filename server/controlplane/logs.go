package controlplane

import (
	"bytes"
	"sync"
	"time"

	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"
)

// LogEntry is one line of a revision's build or deploy output, or of its
// agent's output.
type LogEntry struct {
	// ID increases along the line's source: the build and deploy lines of
	// every revision share one sequence, each deployment's agent output
	// has its own.
	ID        int64     `json:"id"`
	Timestamp time.Time `json:"timestamp"`
	Level     string    `json:"level"`
	Message   string    `json:"message"`
	// Phase is "build" or "deploy" (the official deploy client reads them
	// from separate endpoints), or "agent": what the running agent wrote.
	Phase string `json:"phase"`
	// Stream is "stdout" or "stderr" for agent output.
	Stream string `json:"stream,omitempty"`
	// RevisionID is the revision whose agent wrote an agent line.
	RevisionID string `json:"revision_id,omitempty"`

	deploymentID string // of agent output, until it is stored
}

// logBook writes the revision and agent logs and hands each committed line
// to the followers subscribed to it. The reconciler writes build, deploy
// and health lines through it and the driver agent output; handlers read
// what it stored and follow it.
type logBook struct {
	update func(func(*bolt.Tx) error) error
	now    func() time.Time
	log    zerolog.Logger
	hub    hub
	agent  *agentLogs

	openMu   sync.Mutex
	openLogs map[string]int // revision id → logs being written
}

func newLogBook(update func(func(*bolt.Tx) error) error, now func() time.Time, log zerolog.Logger, agentLimit int) *logBook {
	if agentLimit <= 0 {
		agentLimit = DefaultAgentLogLimit
	}
	b := &logBook{update: update, now: now, log: log}
	b.agent = &agentLogs{b: b, limit: agentLimit}
	return b
}

// revisionLog buffers a revision's log lines and writes them in batches, so
// a chatty build costs a few commits rather than one fsync per line.
type revisionLog struct {
	b       *logBook
	revID   string
	phase   string // set before each step; "build" until the deploy starts
	mu      sync.Mutex
	pending []LogEntry
	partial bytes.Buffer
	stop    chan struct{}
	done    chan struct{}
	flushMu sync.Mutex // one flush at a time: followers see ids in order
}

// newRevisionLog starts a log that flushes every 300 ms, so someone
// following a deploy sees its output as it happens.
func (b *logBook) newRevisionLog(revID string) *revisionLog {
	l := &revisionLog{b: b, revID: revID, stop: make(chan struct{}), done: make(chan struct{})}
	b.writing(revID, 1)
	go func() {
		defer close(l.done)
		t := time.NewTicker(300 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-t.C:
				l.Flush()
			}
		}
	}()
	return l
}

// Close stops the periodic flush and writes what is left.
func (l *revisionLog) Close() {
	close(l.stop)
	<-l.done
	l.Flush()
	l.b.writing(l.revID, -1)
}

// writing counts the open logs of a revision: a follower ends only once
// the revision is final and nothing writes its log any more, so that the
// last lines (the reason of a failure) are never cut off.
func (b *logBook) writing(revID string, delta int) {
	b.openMu.Lock()
	defer b.openMu.Unlock()
	if b.openLogs == nil {
		b.openLogs = map[string]int{}
	}
	b.openLogs[revID] += delta
	if b.openLogs[revID] <= 0 {
		delete(b.openLogs, revID)
	}
}

// logOpen says whether a revision's log is still being written.
func (b *logBook) logOpen(revID string) bool {
	b.openMu.Lock()
	defer b.openMu.Unlock()
	return b.openLogs[revID] > 0
}

func (l *revisionLog) Add(level, msg string) {
	l.mu.Lock()
	l.pending = append(l.pending, LogEntry{Timestamp: l.b.now(), Level: level, Message: msg, Phase: l.phaseLocked()})
	full := len(l.pending) >= 256
	l.mu.Unlock()
	if full {
		l.Flush()
	}
}

type levelWriter struct {
	l     *revisionLog
	level string
}

// Write splits driver output into lines.
func (w levelWriter) Write(p []byte) (int, error) {
	w.l.mu.Lock()
	w.l.partial.Write(p)
	var lines []string
	for {
		i := bytes.IndexByte(w.l.partial.Bytes(), '\n')
		if i < 0 {
			break
		}
		lines = append(lines, string(w.l.partial.Next(i + 1)[:i]))
	}
	w.l.mu.Unlock()
	for _, line := range lines {
		w.l.Add(w.level, line)
	}
	return len(p), nil
}

func (l *revisionLog) Writer(level string) levelWriter { return levelWriter{l: l, level: level} }

// SetPhase switches the phase later lines are recorded under.
func (l *revisionLog) SetPhase(phase string) {
	l.Flush() // a partial line belongs to the phase that wrote it
	l.mu.Lock()
	l.phase = phase
	l.mu.Unlock()
}

func (l *revisionLog) phaseLocked() string {
	if l.phase == "" {
		return "build"
	}
	return l.phase
}

// Flush writes the buffered lines (and any unterminated last line).
func (l *revisionLog) Flush() {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	if l.partial.Len() > 0 {
		l.pending = append(l.pending, LogEntry{Timestamp: l.b.now(), Level: "info", Message: l.partial.String(), Phase: l.phaseLocked()})
		l.partial.Reset()
	}
	batch := l.pending
	l.pending = nil
	l.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	err := l.b.update(func(tx *bolt.Tx) error {
		for i := range batch {
			id, err := appendLogID(tx, l.revID, batch[i])
			if err != nil {
				return err
			}
			batch[i].ID = id
		}
		return nil
	})
	if err != nil {
		l.b.log.Error().Err(err).Str("revision_id", l.revID).Msg("write revision log")
		return
	}
	// Only committed lines are published: a follower that is dropped
	// catches up from the database and finds every line it was sent.
	l.b.hub.Publish(revisionTopic(l.revID), batch...)
}
