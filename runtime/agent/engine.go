package agent

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

// The agent database (<SLIPWAY_AGENT_DATA_DIR>/agent.db):
//
//	meta              version → schema version
//	assistants        assistant id → Assistant
//	threads           thread id → threadRecord (state, active run, queue)
//	runs              run id → runRecord
//	idx_thread_runs   thread id ‖ run id (16 bytes each) → nil
//	checkpoints       thread id ‖ uint64 seq → Checkpoint
//	store             namespace (joined by 0x1f) ‖ 0x00 ‖ key → Item
//	assistant_versions assistant id ‖ 0x00 ‖ uint32 version → Assistant (every version kept)
//	lg                language-host graphs' checkpoints (hostcheckpoints.go)
//	crons             cron id → Cron (crons.go)
//	idx_thread_ttl    expiry ‖ thread id → nil, threads with a TTL (ttl.go)
var Migrations = []storage.Migration{
	{Version: 1, Name: "initial buckets", Apply: func(tx *bolt.Tx) error {
		return storage.CreateBuckets(tx, bAssistants, bThreads, bRuns, bThreadRuns, bCheckpoints, bStore)
	}},
	{Version: 2, Name: "assistant versions", Apply: func(tx *bolt.Tx) error {
		if err := storage.CreateBuckets(tx, bAssistantVersions); err != nil {
			return err
		}
		// Existing assistants keep their current version as their history.
		var all []Assistant
		err := tx.Bucket([]byte(bAssistants)).ForEach(func(_, v []byte) error {
			var a Assistant
			if err := unmarshalStored(v, &a); err != nil {
				return err
			}
			all = append(all, a)
			return nil
		})
		if err != nil {
			return err
		}
		for i := range all {
			if err := putVersion(tx, &all[i]); err != nil {
				return err
			}
		}
		return nil
	}},
	{Version: 3, Name: "language-host checkpoints", Apply: func(tx *bolt.Tx) error {
		return storage.CreateBuckets(tx, bLGCheckpoints, bLGBlobs, bLGWrites)
	}},
	{Version: 4, Name: "crons", Apply: func(tx *bolt.Tx) error {
		return storage.CreateBuckets(tx, bCrons)
	}},
	{Version: 5, Name: "language-host checkpoints in one bucket", Apply: mergeLGBuckets},
	{Version: 6, Name: "thread TTL index", Apply: func(tx *bolt.Tx) error {
		return storage.CreateBuckets(tx, bThreadTTL)
	}},
}

const (
	bAssistants  = "assistants"
	bThreads     = "threads"
	bRuns        = "runs"
	bThreadRuns  = "idx_thread_runs"
	bCheckpoints = "checkpoints"
	bStore       = "store"

	bAssistantVersions = "assistant_versions"
)

// Engine owns the agent database and executes runs.
type Engine struct {
	DB      *bolt.DB
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
	// App is the project's custom routes (HostAppFor), served by the host
	// of its language; nil when there are none.
	App *HostApp
	// Clock is the time crons are scheduled by; nil is time.Now (tests
	// set it to make a cron's date come without waiting for it).
	Clock func() time.Time
	// CronTick is how often the scheduler looks for due crons; 0 is 1 s.
	CronTick time.Duration
	// FlushEvery is how often journaled writes are committed to the
	// database (writebehind.go); 0 is flushEvery.
	FlushEvery time.Duration
	// TTL is langgraph.json's checkpointer.ttl (ttl.go); TTLTick, when
	// set, replaces its sweep interval (tests sweep with SweepTTL).
	TTL     TTLConfig
	TTLTick time.Duration

	httpStreams sync.Map // stream id → *httpExchange of a custom-route request in flight

	w    *storage.Committer
	pend *pendingWrites // journaled writes not yet in bbolt (writebehind.go)
	sem  chan struct{}
	mu   sync.Mutex
	live map[string]*liveRun // run id → its execution and events
	disp map[string]bool     // thread id → a dispatcher is running
	wg   sync.WaitGroup
	ctx  context.Context
}

type liveRun struct {
	cancel context.CancelCauseFunc
	events *EventLog
	done   chan struct{}
	action string // set by Cancel: interrupt or rollback
}

// Start recovers from a crash and starts dispatching queued runs.
func (e *Engine) Start(ctx context.Context) error {
	e.w = &storage.Committer{DB: e.DB}
	if e.Workers < 1 {
		e.Workers = 1
	}
	e.sem = make(chan struct{}, e.Workers)
	e.live, e.disp, e.ctx = map[string]*liveRun{}, map[string]bool{}, ctx
	if err := e.openJournal(); err != nil {
		return err
	}
	e.wg.Add(1)
	go e.flusher()
	if err := e.ensureAssistants(); err != nil {
		return err
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

// Wait blocks until every run goroutine has finished.
func (e *Engine) Wait() { e.wg.Wait() }

// recover ends runs a crash left running, and returns the threads with
// queued runs and those runs.
func (e *Engine) recover() ([]string, []string, error) {
	var queued, pending []string
	err := e.w.Update(func(tx *bolt.Tx) error {
		queued, pending = queued[:0], pending[:0]
		threads := tx.Bucket([]byte(bThreads))
		var recs []threadRecord
		err := threads.ForEach(func(_, v []byte) error {
			var t threadRecord
			if err := unmarshalStored(v, &t); err != nil {
				return err
			}
			if t.Active != "" || len(t.Queue) > 0 {
				recs = append(recs, t)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for i := range recs {
			t := &recs[i]
			if t.Active != "" {
				r, err := getRun(tx, t.Active)
				done := false
				if err == nil {
					if done, err = recoverCancelled(tx, r, time.Now().UTC()); err != nil {
						return err
					}
				}
				if err == nil && !done {
					r.Status, r.Error, r.UpdatedAt = RunError, "the agent server restarted while the run was running", time.Now().UTC()
					if err := putJSON(tx.Bucket([]byte(bRuns)), r.RunID, r); err != nil {
						return err
					}
				}
				t.Active = ""
				t.Status = ThreadError
				if done {
					t.Status = ThreadInterrupted
				}
			}
			if len(t.Queue) > 0 {
				t.Status = ThreadBusy
				queued = append(queued, t.ThreadID)
				pending = append(pending, t.Queue...)
			}
			if err := putJSON(threads, t.ThreadID, t); err != nil {
				return err
			}
		}
		return nil
	})
	return queued, pending, err
}

func putJSON(b *bolt.Bucket, key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	// Keys are mostly time-ordered (UUIDv7 ids, checkpoint sequences), so
	// inserts land at the end: fill pages instead of splitting them in half.
	b.FillPercent = 0.9
	return b.Put([]byte(key), raw)
}

func getJSON(b *bolt.Bucket, key string, v any) error {
	raw := b.Get([]byte(key))
	if raw == nil {
		return ErrNotFound
	}
	return unmarshalStored(raw, v)
}

func getThread(tx *bolt.Tx, id string) (*threadRecord, error) {
	var t threadRecord
	if err := getJSON(tx.Bucket([]byte(bThreads)), id, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// threadExists answers without decoding the record, whose values grow
// with the conversation.
func threadExists(tx *bolt.Tx, id string) bool {
	return tx.Bucket([]byte(bThreads)).Get([]byte(id)) != nil
}

func getRun(tx *bolt.Tx, id string) (*runRecord, error) {
	var r runRecord
	if err := getJSON(tx.Bucket([]byte(bRuns)), id, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

func idxKey(thread, run string) []byte {
	t, r := uuid.MustParse(thread), uuid.MustParse(run)
	return append(t[:], r[:]...)
}

func cpKey(thread string, seq uint64) []byte {
	t := uuid.MustParse(thread)
	return append(t[:], storage.U64(seq)...)
}
