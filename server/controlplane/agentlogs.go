package controlplane

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/runtime"
)

// DefaultAgentLogLimit is how much agent output a deployment keeps when
// SLIPWAY_AGENT_LOG_LIMIT_KB is not set.
const DefaultAgentLogLimit = 2 << 20

// agentLogs collects the output of running agents from the runtime driver
// and keeps the last Limit bytes of each deployment's in its ring in the
// agent_logs bucket. Lines are buffered and written every 300 ms in one
// transaction for all deployments, as revision logs are, so a chatty agent
// costs a few commits a second however much it writes. The driver's
// goroutines never wait for the database: Line only appends to a buffer,
// which is itself bounded (pendingLimit); lines beyond it are counted and
// replaced by one line saying how many were dropped.
type agentLogs struct {
	b     *logBook
	limit int // bytes per deployment

	mu      sync.Mutex
	pending []LogEntry
	bytes   int
	dropped map[string]int // deployment → lines dropped since the last flush
	flushMu sync.Mutex     // one flush at a time: published ids stay in order
}

// pendingLimit bounds the output buffered between two flushes.
const pendingLimit = 8 << 20

var _ runtime.Output = (*agentLogs)(nil)

// Line buffers one line of agent output (runtime.Output).
func (a *agentLogs) Line(l runtime.OutputLine) {
	level := "info"
	if l.Stream == "stderr" {
		level = "warning"
	}
	// The agent logs JSON (SLIPWAY_LOG_FORMAT=json): its own level is
	// the better one.
	if len(l.Text) > 0 && l.Text[0] == '{' {
		var v struct {
			Level string `json:"level"`
		}
		if json.Unmarshal([]byte(l.Text), &v) == nil && v.Level != "" {
			level = v.Level
		}
	}
	e := LogEntry{Timestamp: l.Time, Level: level, Message: l.Text, Phase: "agent", Stream: l.Stream,
		RevisionID: l.RevisionID, deploymentID: l.DeploymentID}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.bytes+len(l.Text) > pendingLimit {
		if a.dropped == nil {
			a.dropped = map[string]int{}
		}
		a.dropped[l.DeploymentID]++
		return
	}
	a.bytes += len(l.Text)
	a.pending = append(a.pending, e)
}

// run flushes every 300 ms until stop is closed, then once more.
func (a *agentLogs) run(stop <-chan struct{}) {
	t := time.NewTicker(300 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			a.Flush()
			return
		case <-t.C:
			a.Flush()
		}
	}
}

// Flush writes the buffered lines, trims each ring to its bound, and then
// tells followers about the lines it wrote.
func (a *agentLogs) Flush() {
	a.flushMu.Lock()
	defer a.flushMu.Unlock()
	a.mu.Lock()
	batch, dropped := a.pending, a.dropped
	a.pending, a.dropped, a.bytes = nil, nil, 0
	a.mu.Unlock()
	for dep, n := range dropped {
		batch = append(batch, LogEntry{Timestamp: a.b.now(), Level: "warning", Phase: "agent", deploymentID: dep,
			Message: fmt.Sprintf("%d lines of agent output were dropped: the agent wrote faster than they could be stored", n)})
	}
	if len(batch) == 0 {
		return
	}
	var written []LogEntry
	err := a.b.update(func(tx *bolt.Tx) error {
		written = written[:0]
		gone := map[string]bool{}
		for _, e := range batch {
			if gone[e.deploymentID] {
				continue
			}
			id, err := uuid.Parse(e.deploymentID)
			if err != nil {
				continue
			}
			// Output may still arrive from an agent being torn down
			// after its deployment's records are gone: it has no ring to
			// go to.
			if !deploymentRecorded(tx, id) {
				gone[e.deploymentID] = true
				continue
			}
			seq, err := appendAgentLog(tx, id, e, a.limit)
			if err != nil {
				return err
			}
			e.ID = int64(seq)
			written = append(written, e)
		}
		return nil
	})
	if err != nil {
		a.b.log.Error().Err(err).Msg("write agent output")
		return
	}
	for _, e := range written {
		a.b.hub.Publish(deploymentTopic(e.deploymentID), e)
	}
}

// mergePages merges a page of build/deploy lines and one of agent lines
// (mergeLogs); when a page is full (more of its source follows it), the
// result ends with that page's last line, since what comes after it in
// time may be in the part of that source not read yet. more says whether
// lines follow the result.
func mergePages(own, agent []LogEntry, ownFull, agentFull bool) (_ []LogEntry, more bool) {
	out := mergeLogs(own, agent)
	if !ownFull && !agentFull {
		return out, false
	}
	var nOwn, nAgent int
	for i, e := range out {
		if e.Phase == "agent" {
			nAgent++
		} else {
			nOwn++
		}
		if ownFull && nOwn == len(own) || agentFull && nAgent == len(agent) {
			return out[:i+1], true
		}
	}
	return out, true
}

// mergeLogs merges build/deploy lines and agent lines, each oldest first,
// by time; lines of one source keep their order.
func mergeLogs(a, b []LogEntry) []LogEntry {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return b
	}
	out := make([]LogEntry, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if b[0].Timestamp.Before(a[0].Timestamp) {
			out, b = append(out, b[0]), b[1:]
		} else {
			out, a = append(out, a[0]), a[1:]
		}
	}
	return append(append(out, a...), b...)
}
