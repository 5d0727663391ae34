package agent

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"
	"go.opentelemetry.io/otel/trace"

	"slipway/oteltrace"
)

// Engine owns the agent database and executes runs.
type Engine struct {
	// DB is the agent's bbolt database, the default store; Store, when
	// set, replaces it (OpenPostgresStore) and DB is not used.
	DB      *bolt.DB
	Store   Store
	Graphs  map[string]Graph
	Workers int
	Timeout time.Duration
	Log     zerolog.Logger
	// DefaultConfigs are the system assistants' configs by graph id
	// (LANGGRAPH_CONFIG); a config's "context" becomes the assistant's.
	DefaultConfigs map[string]map[string]any
	// Python is the interpreter of the Python host when set
	// (SLIPWAY_AGENT_PYTHON); else the project's virtualenv or python3.
	Python string
	// HostProcesses is how many processes each language's host runs
	// (hosts.Pool); 0 or less is one.
	HostProcesses int
	// HostNice lowers the hosts' CPU priority by as many nice steps
	// (hosts.Spec.Nice).
	HostNice int
	// App is the project's custom routes (HostAppFor), served by the host
	// of its language; nil when there are none.
	App *HostApp
	// Clock is the time crons are scheduled by; nil is time.Now (tests
	// set it to make a cron's date come without waiting for it).
	Clock func() time.Time
	// CronTick is how often the scheduler looks for due crons; 0 is 1 s.
	CronTick time.Duration
	// FlushEvery is how often journaled writes are committed to the
	// database (store_writebehind.go); 0 is flushEvery.
	FlushEvery time.Duration
	// TTL is langgraph.json's checkpointer.ttl (ttl.go); TTLTick, when
	// set, replaces its sweep interval (tests sweep with SweepTTL).
	TTL     TTLConfig
	TTLTick time.Duration
	// Metrics, when set, count runs, streams and checkpoint writes
	// (metrics.go); from Start on, their gauges read this engine.
	Metrics *Metrics
	// Tracing receives each run's span (otel.go); nil: off.
	Tracing *oteltrace.Provider
	// Bus, when set, makes this engine one of several processes over a
	// shared Store (runbus.go, replicas.go): runs are claimed under a
	// lease and taken over when their worker dies, streams, cancellations
	// and wake-ups cross processes through it. Role says what this
	// process does ("" is RoleAll); WorkerID names it in leases, logs and
	// run metadata; Lease is a claim's length without renewal (0: 30 s);
	// PollEvery is the workers' safety-net scan for claimable runs whose
	// wake-up was lost (0: 2 s).
	Bus       RunBus
	Role      string
	WorkerID  string
	Lease     time.Duration
	PollEvery time.Duration

	httpStreams sync.Map // stream id → *httpExchange of a custom-route request in flight

	// store is the engine's persistence (store.go): Store, or the bbolt
	// store over DB, its write-behind journal beside it.
	store Store
	sem   chan struct{}
	mu    sync.Mutex
	live  map[string]*liveRun // run id → its execution and events
	disp  map[string]bool     // thread id → a dispatcher is running
	again map[string]bool     // thread id → its dispatcher looks again before it stops (dispatchWith)
	wg    sync.WaitGroup
	ctx   context.Context
	// emptyClaims counts this worker's claims that found no run (replicas.go).
	emptyClaims atomic.Int64
}

type liveRun struct {
	cancel context.CancelCauseFunc
	events *EventLog
	done   chan struct{}
	action string // set by Cancel: interrupt or rollback
	// parent is the span the run was created under (otel.go).
	parent trace.SpanContext
	// lost is set when another worker took the run over (its lease
	// expired): this attempt ends without recording anything.
	lost atomic.Bool
	// attempt is the attempt this process executes (replicas.go).
	attempt int
}

// Start recovers from a crash and starts dispatching queued runs.
func (e *Engine) Start(ctx context.Context) error {
	if e.Workers < 1 {
		e.Workers = 1
	}
	e.sem = make(chan struct{}, e.Workers)
	e.live, e.disp, e.again, e.ctx = map[string]*liveRun{}, map[string]bool{}, map[string]bool{}, ctx
	if e.Store != nil {
		// A store of its own (PostgreSQL) has no journal to replay or
		// flush, and its schema was migrated when it was opened.
		e.store = e.Store
	} else if err := e.startBolt(ctx); err != nil {
		return err
	}
	e.Metrics.attach(e)
	if err := e.ensureAssistants(); err != nil {
		return err
	}
	if e.distributed() {
		return e.startReplica(ctx)
	}
	threads, pending, err := e.recover()
	if err != nil {
		return err
	}
	// Runs left pending get their event logs before any dispatcher starts,
	// so a join or stream after the restart waits for them like for a run
	// created now instead of answering at once.
	for _, id := range pending {
		e.prepareEvents(id)
	}
	for _, t := range threads {
		e.dispatch(t)
	}
	e.wg.Add(2)
	go e.runCrons()
	go e.runTTLSweeper()
	return nil
}

// startBolt opens the bbolt store over DB, replaying its journal, and
// flushes the journal until ctx ends.
func (e *Engine) startBolt(ctx context.Context) error {
	st, err := openBoltStore(e.DB, func(applied, skipped int) {
		e.Log.Info().Int("applied", applied).Int("skipped", skipped).Msg("journal replayed")
	})
	if err != nil {
		return err
	}
	e.store = st
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		st.run(ctx, e.FlushEvery, func(err error) { e.Log.Error().Err(err).Msg("apply the journal to the database") })
	}()
	return nil
}

// Wait blocks until every run goroutine has finished.
func (e *Engine) Wait() { e.wg.Wait() }

// errRestarted is what a run a restart cut short says, on the run and on
// its thread.
const errRestarted = "the agent server restarted while the run was running"

// recover ends runs a crash left running, and returns the threads with
// queued runs and those runs.
func (e *Engine) recover() ([]string, []string, error) {
	var queued, pending []string
	err := e.store.Update(context.Background(), func(tx Tx) error {
		queued, pending = queued[:0], pending[:0]
		var recs []threadRecord
		// The busy index lists exactly these: start-up reads O(active
		// runs) records, not every thread.
		err := tx.ForEachBusyThread(func(t *threadRecord) error {
			if t.Active != "" || len(t.Queue) > 0 {
				recs = append(recs, *t)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for i := range recs {
			t := &recs[i]
			if t.Active != "" {
				r, err := tx.GetRun(t.Active)
				done := false
				if err == nil {
					if done, err = recoverCancelled(tx, r, time.Now().UTC()); err != nil {
						return err
					}
				}
				if err == nil && !done {
					r.Status, r.Error, r.UpdatedAt = RunError, errRestarted, time.Now().UTC()
					if err := tx.PutRun(r); err != nil {
						return err
					}
				}
				t.Active = ""
				// RuntimeError, as the Python reference ends a run whose
				// worker kept dying.
				t.Status, t.Error = ThreadError, &RunFailure{Error: "RuntimeError", Message: errRestarted}
				if done {
					ended := RunInterrupted
					if r.CancelAction == StrategyRollback {
						ended = "rollback"
					}
					t.Status, t.Error = ThreadInterrupted, threadError(ended, nil, r.CancelReason)
				}
			}
			if len(t.Queue) > 0 {
				t.Status = ThreadBusy
				queued = append(queued, t.ThreadID)
				pending = append(pending, t.Queue...)
			}
			if err := tx.PutThread(t); err != nil {
				return err
			}
		}
		return nil
	})
	return queued, pending, err
}
