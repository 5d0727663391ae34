package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestPostgresStoreConformance(t *testing.T) {
	runStoreConformance(t, func(t *testing.T) Store { return openPGTestStore(t) })
}

// An empty schema is migrated to the newest version; opening it again
// (and two stores opening at once) leaves it there and keeps the rows.
func TestPostgresStoreMigrations(t *testing.T) {
	ctx := context.Background()
	cfg := pgTestSchema(t)
	want, err := pgMigrations.ReadDir("pgmigrations")
	if err != nil {
		t.Fatal(err)
	}
	version := func(s *pgStore) int {
		var v int
		if err := s.pool.QueryRow(ctx, "select version from agent_schema_version").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	s1, err := openPGStore(ctx, cfg.Copy())
	if err != nil {
		t.Fatal(err)
	}
	if v := version(s1); v != len(want) {
		t.Fatalf("schema version after opening an empty schema = %d, want %d", v, len(want))
	}
	th := newThreadRec("kept")
	mustUpdate(t, s1, func(tx Tx) error { return tx.PutThread(th) })
	s1.Close()
	var wg sync.WaitGroup
	stores := make([]*pgStore, 2)
	errs := make([]error, 2)
	for i := range stores {
		wg.Add(1)
		go func() { defer wg.Done(); stores[i], errs[i] = openPGStore(ctx, cfg.Copy()) }()
	}
	wg.Wait()
	for i, s := range stores {
		if errs[i] != nil {
			t.Fatalf("reopen %d: %v", i, errs[i])
		}
		defer s.Close()
		if v := version(s); v != len(want) {
			t.Errorf("schema version after reopening = %d, want %d", v, len(want))
		}
		mustView(t, s, func(tx ReadTx) error {
			if got, err := tx.GetThread(th.ThreadID); err != nil || got.Metadata["k"] != "kept" {
				t.Errorf("the thread written before reopening: %+v %v", got, err)
			}
			return nil
		})
	}
}

// Two stores (two workers) claiming one queued run: exactly one gets it.
func TestPostgresStoreClaimRace(t *testing.T) {
	ctx := context.Background()
	cfg := pgTestSchema(t)
	a, err := openPGStore(ctx, cfg.Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := openPGStore(ctx, cfg.Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for round := 0; round < 10; round++ {
		th := newThreadRec("")
		r := newRunRec(th.ThreadID)
		th.Queue = []string{r.RunID}
		mustUpdate(t, a, func(tx Tx) error { return errors.Join(tx.PutRun(r), tx.PutThread(th)) })
		var wg sync.WaitGroup
		var won atomic.Int32
		start := make(chan struct{})
		for i, s := range []*pgStore{a, b, a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				err := s.Update(ctx, func(tx Tx) error {
					got, err := tx.ClaimNextRun(th.ThreadID, runClaim{Worker: fmt.Sprint("w", i), Now: time.Now().UTC(), Lease: time.Minute})
					if got != nil {
						won.Add(1)
					}
					return err
				})
				if err != nil {
					t.Error(err)
				}
			}()
		}
		close(start)
		wg.Wait()
		// won counts attempts, and a retried unit's attempt that lost is
		// not counted: the claims that committed are what the run says.
		mustView(t, a, func(tx ReadTx) error {
			got, err := tx.GetRun(r.RunID)
			if err != nil || got.Status != RunRunning || got.Lease == nil {
				t.Errorf("the claimed run: %+v %v", got, err)
			}
			active, queue, _ := tx.ThreadQueue(th.ThreadID)
			if active != r.RunID || len(queue) != 0 {
				t.Errorf("thread after the race: active %q queue %v", active, queue)
			}
			return nil
		})
		if won.Load() < 1 {
			t.Fatalf("round %d: nobody claimed the run", round)
		}
	}
}

// Each of racing claims that committed returned a run only once: a unit
// that claimed and was rolled back to retry saw, on its retry, the
// winner's claim.
func TestPostgresStoreClaimIsExclusive(t *testing.T) {
	ctx := context.Background()
	s := openPGTestStore(t)
	th := newThreadRec("")
	r := newRunRec(th.ThreadID)
	th.Queue = []string{r.RunID}
	mustUpdate(t, s, func(tx Tx) error { return errors.Join(tx.PutRun(r), tx.PutThread(th)) })
	var wg sync.WaitGroup
	var committed atomic.Int32
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got *runRecord
			err := s.Update(ctx, func(tx Tx) error {
				var err error
				got, err = tx.ClaimNextRun(th.ThreadID, runClaim{Worker: fmt.Sprint("w", i), Now: time.Now().UTC(), Lease: time.Minute})
				return err
			})
			if err != nil {
				t.Error(err)
			}
			if got != nil {
				committed.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := committed.Load(); n != 1 {
		t.Fatalf("%d committed claims returned the run, want exactly 1", n)
	}
}

// A worker that died holding a lease: once it expired, another worker
// takes the run over, still running, under its own lease; the dead
// worker can no longer renew it.
func TestPostgresStoreExpiredLeaseTakenOver(t *testing.T) {
	s := openPGTestStore(t)
	th := newThreadRec("")
	r := newRunRec(th.ThreadID)
	th.Queue = []string{r.RunID}
	mustUpdate(t, s, func(tx Tx) error { return errors.Join(tx.PutRun(r), tx.PutThread(th)) })
	t0 := time.Now().UTC()
	claim := func(worker string, now time.Time) (got *runRecord) {
		mustUpdate(t, s, func(tx Tx) error {
			var err error
			got, err = tx.ClaimNextRun(th.ThreadID, runClaim{Worker: worker, Now: now, Lease: 10 * time.Second})
			return err
		})
		return got
	}
	if got := claim("dead", t0); got == nil || got.Lease.Worker != "dead" {
		t.Fatalf("first claim = %+v", got)
	}
	if got := claim("alive", t0.Add(5*time.Second)); got != nil {
		t.Fatalf("taken over inside the lease: %+v", got)
	}
	got := claim("alive", t0.Add(11*time.Second))
	if got == nil || got.RunID != r.RunID || got.Status != RunRunning || got.Lease.Worker != "alive" ||
		!got.Lease.Until.Equal(t0.Add(21*time.Second)) {
		t.Fatalf("after expiry = %+v, want r running under alive until t0+21s", got)
	}
	err := s.Update(context.Background(), func(tx Tx) error { return tx.RenewLease(r.RunID, "dead", t0.Add(time.Hour)) })
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("the dead worker renewing: %v, want ErrConflict", err)
	}
}

// A unit of work that fails to serialize runs again and then commits;
// one that keeps failing gives up with the reason wrapped.
func TestPostgresStoreSerializationRetry(t *testing.T) {
	ctx := context.Background()
	s := openPGTestStore(t)
	th := newThreadRec("0")
	mustUpdate(t, s, func(tx Tx) error { return tx.PutThread(th) })
	// Two units read the thread, meet, then both write it: one of them
	// fails to serialize (40001) and runs again on the other's write.
	var attempts atomic.Int32
	var met sync.WaitGroup
	met.Add(2)
	var once [2]sync.Once
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.Update(ctx, func(tx Tx) error {
				attempts.Add(1)
				cur, err := tx.GetThread(th.ThreadID)
				if err != nil {
					return err
				}
				once[i].Do(met.Done)
				met.Wait()
				n := 0
				fmt.Sscan(cur.Metadata["k"].(string), &n)
				cur.Metadata["k"] = fmt.Sprint(n + 1)
				return tx.PutThread(cur)
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	mustView(t, s, func(tx ReadTx) error {
		got, err := tx.GetThread(th.ThreadID)
		if err != nil || got.Metadata["k"] != "2" {
			t.Errorf("after two increments: %v %v, want 2 (no lost update)", got.Metadata, err)
		}
		return nil
	})
	if n := attempts.Load(); n < 3 {
		t.Errorf("%d attempts, want a retry (at least 3)", n)
	}
	// Always failing to serialize: bounded, and the cause is kept.
	n := 0
	err := s.Update(ctx, func(tx Tx) error {
		n++
		return tx.(*pgTx).fail("test", &pgconnError40001)
	})
	if !retryable(err) || n != pgMaxAttempts {
		t.Errorf("a unit that never serializes: %v after %d runs, want the 40001 wrapped after %d", err, n, pgMaxAttempts)
	}
}

// A failing fn keeps nothing, whatever it wrote, and publishes nothing.
func TestPostgresStoreFailedUnitKeepsNothing(t *testing.T) {
	ctx := context.Background()
	s := openPGTestStore(t)
	var heard atomic.Int32
	defer s.Subscribe(func(storeEvent) { heard.Add(1) })()
	th, r := newThreadRec(""), newRunRec("")
	r.ThreadID = th.ThreadID
	boom := errors.New("boom")
	err := s.Update(ctx, func(tx Tx) error {
		return errors.Join(tx.PutThread(th), tx.PutRun(r), tx.IndexRun(th.ThreadID, r.RunID),
			tx.PutCheckpoint(th.ThreadID, 1, &Checkpoint{Checkpoint: CheckpointRef{ThreadID: th.ThreadID}}),
			tx.PutItem(&Item{Namespace: []string{"n"}, Key: "k"}), tx.PutCron(&Cron{CronID: "c"}),
			tx.PutAssistant(&Assistant{AssistantID: "a"}), tx.PutCheckpointRow([]byte("row"), []byte("v")),
			tx.PutTTLEntry(ttlEntryOf(time.Now(), th.ThreadID)), boom)
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update = %v, want boom", err)
	}
	var n int
	if err := s.pool.QueryRow(ctx, `select (select count(*) from threads) + (select count(*) from runs) + (select count(*) from thread_runs)
		+ (select count(*) from checkpoints) + (select count(*) from items) + (select count(*) from crons)
		+ (select count(*) from assistants) + (select count(*) from lg_rows) + (select count(*) from thread_ttl)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 || heard.Load() != 0 {
		t.Errorf("a failed unit kept %d rows and published %d events, want none", n, heard.Load())
	}
}

// Another store on the same database (a replica) hears of a run queued
// and changed here once it is committed, through LISTEN/NOTIFY.
func TestPostgresStoreEventsReachOtherStores(t *testing.T) {
	ctx := context.Background()
	cfg := pgTestSchema(t)
	a, err := openPGStore(ctx, cfg.Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := openPGStore(ctx, cfg.Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got := make(chan storeEvent, 16)
	defer b.Subscribe(func(ev storeEvent) { got <- ev })()
	// A store of another schema in the same database is not a replica:
	// it hears nothing of this schema's runs.
	other, err := openPGStore(ctx, pgTestSchema(t).Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var strays atomic.Int32
	defer other.Subscribe(func(storeEvent) { strays.Add(1) })()
	var own atomic.Int32
	defer a.Subscribe(func(storeEvent) { own.Add(1) })()
	th, r := newThreadRec(""), newRunRec("")
	r.ThreadID = th.ThreadID
	_ = a.Update(ctx, func(tx Tx) error { _ = tx.PutRun(r); return errors.New("abandoned") })
	mustUpdate(t, a, func(tx Tx) error {
		return errors.Join(tx.PutThread(th), tx.PutRun(r), tx.IndexRun(th.ThreadID, r.RunID))
	})
	want := []storeEvent{
		{Kind: eventRunChanged, Thread: th.ThreadID, Run: r.RunID, Status: RunPending},
		{Kind: eventRunQueued, Thread: th.ThreadID, Run: r.RunID},
	}
	for i, w := range want {
		select {
		case ev := <-got:
			if ev != w {
				t.Errorf("event %d on the other store = %+v, want %+v", i, ev, w)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("event %d never reached the other store", i)
		}
	}
	if own.Load() != 2 {
		t.Errorf("the committing store heard %d events, want its 2 once (not again by NOTIFY)", own.Load())
	}
	select {
	case ev := <-got:
		t.Errorf("an extra event: %+v", ev)
	case <-time.After(200 * time.Millisecond):
	}
	if n := strays.Load(); n != 0 {
		t.Errorf("a store of another schema heard %d of this schema's events", n)
	}
}

// pgconnError40001 is a serialization failure as the server reports it.
var pgconnError40001 = pgconn.PgError{Code: "40001", Message: "could not serialize access"}

// TestPGRetryPause: the pause before a unit's next attempt is random (so
// units that collided do not retry in step), grows with the attempts,
// and stays under pgRetryCap.
func TestPGRetryPause(t *testing.T) {
	for _, c := range []struct {
		attempt int
		bound   time.Duration
	}{{1, 2 * time.Millisecond}, {3, 8 * time.Millisecond}, {7, 128 * time.Millisecond}, {8, pgRetryCap}, {pgMaxAttempts, pgRetryCap}} {
		seen := map[time.Duration]bool{}
		for range 200 {
			p := pgRetryPause(c.attempt)
			if p <= 0 || p > c.bound {
				t.Fatalf("attempt %d: pause %v, want within (0, %v]", c.attempt, p, c.bound)
			}
			seen[p] = true
		}
		if len(seen) < 10 {
			t.Fatalf("attempt %d: %d distinct pauses in 200, want them random", c.attempt, len(seen))
		}
	}
}
