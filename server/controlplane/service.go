package controlplane

import (
	"sync"
	"time"

	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"

	"slipway/runtime"
	"slipway/server/audit"
	"slipway/storage"
)

// Service is the control plane: it owns deployments, revisions, listeners,
// uploads and tracing projects in the control-plane database, and drives
// the runtime driver toward what they describe.
type Service struct {
	DB        *bolt.DB
	Sealer    *storage.Sealer
	Driver    runtime.Driver
	PublicURL string
	DataDir   string
	MaxUpload int64 // bytes
	Log       zerolog.Logger
	Now       func() time.Time

	// Writer group-commits writes (shared with the organization API).
	Writer *storage.Committer
	// Audit records tracked operations.
	Audit *audit.Recorder

	// AgentLogLimit bounds each deployment's stored agent output, in
	// bytes (DefaultAgentLogLimit when 0).
	AgentLogLimit int
	// Heartbeat is how often a quiet log stream sends a comment, so that
	// proxies keep it open and clients notice a dead connection (15 s
	// when 0).
	Heartbeat time.Duration
	// HealthInterval is how often serving agents are checked (default 5 s).
	HealthInterval time.Duration

	rec *reconciler
	// watch checks serving agents and recreates lost ones (health.go);
	// nil when the driver cannot tell (the fake driver).
	watch *runtime.Watcher
	// restoring holds deployments whose active revision is restored once
	// at start-up; after that, the watcher decides when to start agents.
	restoring sync.Map
	targets   targetCache

	hub       hub
	agentOnce sync.Once
	agent     *agentLogs
	openMu    sync.Mutex
	openLogs  map[string]int // revision id → logs being written
}

// AgentOutput is where the runtime driver sends what agents write; lines
// are stored once Start has begun the periodic flush.
func (s *Service) AgentOutput() runtime.Output { return s.agentLog() }

func (s *Service) agentLog() *agentLogs {
	s.agentOnce.Do(func() {
		limit := s.AgentLogLimit
		if limit <= 0 {
			limit = DefaultAgentLogLimit
		}
		s.agent = &agentLogs{s: s, limit: limit}
	})
	return s.agent
}

func (s *Service) heartbeat() time.Duration {
	if s.Heartbeat > 0 {
		return s.Heartbeat
	}
	return 15 * time.Second
}

// update runs fn in a durable write transaction that concurrent requests
// share (group commit), so one fsync acknowledges many writes.
func (s *Service) update(fn func(*bolt.Tx) error) error {
	return s.Writer.Update(fn)
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}
