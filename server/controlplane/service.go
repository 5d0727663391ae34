package controlplane

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"

	"slipway/oteltrace"
	"slipway/runtime"
	"slipway/server/track"
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
	// AgentsURL is SLIPWAY_AGENTS_URL, the origin agents are served on
	// when it is not PublicURL's (see AgentsBase).
	AgentsURL string
	// OwnHosts are the host names (storage.HostKey form) that reach
	// Slipway itself; no custom_url may claim one (see ownHost).
	OwnHosts  []string
	DataDir   string
	MaxUpload int64 // bytes
	// PostgresURL is SLIPWAY_POSTGRES_URL (see Reconciler.PostgresURL).
	PostgresURL string
	// RedisURL is SLIPWAY_REDIS_URL (see Reconciler.RedisURL).
	RedisURL string
	Log      zerolog.Logger
	Now      func() time.Time

	// Writer group-commits writes (shared with the organization API).
	Writer *storage.Committer
	// Audit records tracked operations.
	Audit *track.Recorder

	// AgentLogLimit bounds each deployment's stored agent output, in
	// bytes (DefaultAgentLogLimit when 0).
	AgentLogLimit int
	// Heartbeat is how often a quiet log stream sends a comment, so that
	// proxies keep it open and clients notice a dead connection (15 s
	// when 0).
	Heartbeat time.Duration
	// HealthInterval is how often serving agents are checked (default 5 s).
	HealthInterval time.Duration
	// FollowersPerCredential and FollowersMax cap the log streams
	// followed at once by one credential and in all
	// (DefaultFollowersPerCredential, DefaultFollowersMax when 0).
	FollowersPerCredential, FollowersMax int
	// Metrics counts the reconciler's work (metrics.go); nil: none.
	Metrics *Metrics
	// Tracing and OTELEnv are the reconciler's (see Reconciler).
	Tracing *oteltrace.Provider
	OTELEnv map[string]string

	// rec is told when a handler committed work for it (Start sets it).
	rec interface{ Kick() }
	// done waits for the reconciler's goroutines (Start sets it).
	done func()

	bookOnce sync.Once
	logs     *logBook

	slotsOnce sync.Once
	slots     *followerSlots
}

// AgentOutput is where the runtime driver sends what agents write; lines
// are stored once Start has begun the periodic flush.
func (s *Service) AgentOutput() runtime.Output { return s.agentLog() }

// book is the log writer the handlers and the reconciler share.
func (s *Service) book() *logBook {
	s.bookOnce.Do(func() { s.logs = newLogBook(s.update, s.now, s.Log, s.AgentLogLimit) })
	return s.logs
}

func (s *Service) agentLog() *agentLogs { return s.book().agent }

// Start begins reconciling the records with the runtime until ctx ends
// (see Reconciler); Wait blocks until it has stopped.
func (s *Service) Start(ctx context.Context) {
	rc := &Reconciler{DB: s.DB, Update: s.update, Driver: s.Driver, Sealer: s.Sealer, DataDir: s.DataDir,
		PublicURL: s.AgentsBase(), Log: s.Log, Now: s.now, HealthInterval: s.HealthInterval, logs: s.book(), Metrics: s.Metrics,
		PostgresURL: s.PostgresURL, RedisURL: s.RedisURL}
	rc.Tracing, rc.OTELEnv = s.Tracing, s.OTELEnv
	rc.Start(ctx)
	s.rec, s.done = rc, rc.Wait
}

// Wait blocks until every reconciler goroutine has returned.
func (s *Service) Wait() {
	if s.done != nil {
		s.done()
	}
}

// kick tells the reconciler that a handler committed work for it.
func (s *Service) kick() {
	if s.rec != nil {
		s.rec.Kick()
	}
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
