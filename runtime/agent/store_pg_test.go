package agent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"slipway/storage"
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

// Searches and counts answer as the bbolt store's: the same records with
// the same data, every sort both ways, filters, offsets and limits.
func TestPostgresStoreSearchMatchesBolt(t *testing.T) {
	pg := openPGTestStore(t)
	bs, _ := openIndexStore(t)
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	statuses := []string{ThreadIdle, "busy", "error", "interrupted"}
	var threads []*threadRecord
	var assistants []*Assistant
	var crons []*Cron
	for i := 0; i < 60; i++ {
		th := newThreadRec("")
		// Equal times on purpose: the id breaks the tie.
		th.CreatedAt = base.Add(time.Duration(rng.IntN(20)) * time.Second)
		th.UpdatedAt = base.Add(time.Duration(rng.IntN(20)) * time.Minute)
		th.Status = statuses[rng.IntN(len(statuses))]
		th.Metadata = map[string]any{"k": fmt.Sprint(rng.IntN(3)), "n": float64(rng.IntN(2)), "obj": map[string]any{"x": float64(rng.IntN(2))}}
		th.Values = map[string]any{"v": float64(rng.IntN(3))}
		threads = append(threads, th)
		g := fmt.Sprint("Graph", rng.IntN(3))
		a := &Assistant{AssistantID: storage.NewID().String(), GraphID: g, Name: fmt.Sprint([]string{"alpha", "Beta", "gamma"}[rng.IntN(3)], i),
			Metadata: map[string]any{"team": fmt.Sprint(rng.IntN(2)), "tags": []any{"x"}}, Version: 1,
			CreatedAt: th.CreatedAt, UpdatedAt: th.UpdatedAt}
		assistants = append(assistants, a)
		tid := threads[rng.IntN(len(threads))].ThreadID
		var tp *string
		if rng.IntN(2) == 0 {
			tp = &tid
		}
		c := &Cron{CronID: storage.NewID().String(), AssistantID: assistants[rng.IntN(len(assistants))].AssistantID, ThreadID: tp,
			Enabled: rng.IntN(2) == 0, NextRunDate: base.Add(time.Duration(rng.IntN(5)) * time.Hour), Metadata: map[string]any{"m": float64(rng.IntN(2)), "o": []any{}},
			CreatedAt: th.CreatedAt, UpdatedAt: th.UpdatedAt}
		crons = append(crons, c)
	}
	for _, s := range []Store{pg, bs} {
		mustUpdate(t, s, func(tx Tx) error {
			for i := range threads {
				if err := errors.Join(tx.PutThread(threads[i]), tx.PutAssistant(assistants[i]), tx.PutCron(crons[i])); err != nil {
					return err
				}
			}
			return nil
		})
	}
	type answer struct {
		IDs []string
		N   int
		Err string
	}
	errText := func(err error) string {
		if err != nil {
			return err.Error()
		}
		return ""
	}
	compare := func(name string, ask func(tx ReadTx) answer) {
		t.Helper()
		var want, got answer
		mustView(t, bs, func(tx ReadTx) error { want = ask(tx); return nil })
		mustView(t, pg, func(tx ReadTx) error { got = ask(tx); return nil })
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n pg   %+v\n bolt %+v", name, got, want)
		}
	}
	for _, sortBy := range []string{"", "created_at", "updated_at", "thread_id", "status"} {
		for _, desc := range []bool{false, true} {
			for fi, f := range []ThreadFilter{
				{}, {Status: "busy"}, {Metadata: map[string]any{"k": "1"}}, {Metadata: map[string]any{"k": "1", "n": 1}},
				{Status: "idle", Metadata: map[string]any{"n": 0.0}}, {Values: map[string]any{"v": 2.0}},
				{Metadata: map[string]any{"obj": map[string]any{"x": 1.0}}, Limit: 4, Offset: 2},
				{Limit: 7, Offset: 5}, {IDs: []string{threads[3].ThreadID, threads[1].ThreadID, threads[3].ThreadID}},
				{Metadata: map[string]any{"missing": nil}, Limit: 3},
			} {
				f.SortBy, f.Desc = sortBy, desc
				compare(fmt.Sprintf("threads %d by %q desc=%v", fi, sortBy, desc), func(tx ReadTx) answer {
					rs, err := tx.SearchThreads(f)
					n, cerr := tx.CountThreads(f)
					var ids []string
					for _, r := range rs {
						ids = append(ids, r.ThreadID)
					}
					return answer{ids, n, errText(errors.Join(err, cerr))}
				})
			}
		}
	}
	for _, sortBy := range []string{"", "created_at", "updated_at", "assistant_id", "graph_id", "name"} {
		for _, desc := range []bool{false, true} {
			for qi, q := range []AssistantQuery{
				{}, {GraphID: "Graph1"}, {Name: "BET"}, {Metadata: map[string]any{"team": "1"}, Limit: 5, Offset: 1},
				{Metadata: map[string]any{"tags": []any{"x"}}, GraphID: "Graph2"}, {Limit: 3, Offset: 58},
			} {
				q.SortBy, q.Desc = sortBy, desc
				compare(fmt.Sprintf("assistants %d by %q desc=%v", qi, sortBy, desc), func(tx ReadTx) answer {
					as, err := tx.SearchAssistants(q)
					n, cerr := tx.CountAssistants(q)
					var ids []string
					for _, a := range as {
						ids = append(ids, a.AssistantID)
					}
					return answer{ids, n, errText(errors.Join(err, cerr))}
				})
			}
		}
	}
	on := true
	for _, sortBy := range []string{"", "cron_id", "assistant_id", "thread_id", "next_run_date", "end_time", "created_at", "updated_at"} {
		for _, desc := range []bool{false, true} {
			for fi, f := range []CronFilter{
				{}, {AssistantID: crons[0].AssistantID}, {ThreadID: threads[0].ThreadID}, {Enabled: &on, Limit: 4, Offset: 3},
				{Metadata: map[string]any{"m": 1.0}}, {Metadata: map[string]any{"o": []any{}}, Enabled: &on},
			} {
				f.SortBy, f.Desc = sortBy, desc
				compare(fmt.Sprintf("crons %d by %q desc=%v", fi, sortBy, desc), func(tx ReadTx) answer {
					cs, err := tx.SearchCrons(f)
					n, cerr := tx.CountCrons(f)
					var ids []string
					for _, c := range cs {
						ids = append(ids, c.CronID)
					}
					return answer{ids, n, errText(errors.Join(err, cerr))}
				})
			}
		}
	}
	compare("crons of an assistant and of a thread", func(tx ReadTx) answer {
		a, err1 := tx.CronsOf(crons[0].AssistantID, "")
		b, err2 := tx.CronsOf("", threads[0].ThreadID)
		return answer{append(a, b...), 0, errText(errors.Join(err1, err2))}
	})
	// Assistant versions and checkpoints past 9 (numbers, not texts, order
	// them), more than a batch of checkpoints.
	cpThread := storage.NewID().String()
	for _, s := range []Store{pg, bs} {
		mustUpdate(t, s, func(tx Tx) error {
			for v := 1; v <= 12; v++ {
				if err := tx.PutAssistantVersion(&Assistant{AssistantID: "versioned", Version: v}); err != nil {
					return err
				}
			}
			for seq := uint64(1); seq <= 70; seq++ {
				cp := &Checkpoint{Checkpoint: CheckpointRef{ThreadID: cpThread, CheckpointID: fmt.Sprintf("cp%03d", seq)}}
				if err := tx.PutCheckpoint(cpThread, seq, cp); err != nil {
					return err
				}
			}
			return nil
		})
	}
	compare("assistant versions and checkpoints", func(tx ReadTx) answer {
		vs, err := tx.AssistantVersions("versioned")
		var ids []string
		for _, v := range vs {
			ids = append(ids, fmt.Sprint("v", v.Version))
		}
		err2 := tx.CheckpointsNewestFirst(cpThread, func(cp *Checkpoint) (bool, error) {
			ids = append(ids, cp.Checkpoint.CheckpointID)
			return len(ids) < 50, nil
		})
		err3 := tx.CheckpointsBefore(cpThread, "cp040", func(cp *Checkpoint) (bool, error) {
			ids = append(ids, cp.Checkpoint.CheckpointID)
			return true, nil
		})
		err4 := tx.ForEachCheckpoint(cpThread, func(seq uint64, cp *Checkpoint) error {
			ids = append(ids, fmt.Sprint(seq, cp.Checkpoint.CheckpointID))
			return nil
		})
		return answer{ids, len(ids), errText(errors.Join(err, err2, err3, err4))}
	})
	// Store items and checkpoint rows, more than a batch of them, scanned
	// and stopped as on bbolt.
	for _, s := range []Store{pg, bs} {
		mustUpdate(t, s, func(tx Tx) error {
			for i := 0; i < 70; i++ {
				ns := []string{"a", fmt.Sprint("b", i%7)}
				if i%5 == 0 {
					ns = []string{fmt.Sprint("a", i)}
				}
				if err := tx.PutItem(&Item{Namespace: ns, Key: fmt.Sprint("k", i), Value: map[string]any{}}); err != nil {
					return err
				}
				if err := tx.PutCheckpointRow(lgKey("t1", "", lgKindCheckpoint, fmt.Sprintf("%03d", i)), []byte{byte(i)}); err != nil {
					return err
				}
			}
			return nil
		})
	}
	compare("items and checkpoint rows", func(tx ReadTx) answer {
		var keys []string
		err := tx.ScanItems([]string{"a"}, func(it *Item) (bool, error) {
			keys = append(keys, fmt.Sprint(it.Namespace, it.Key))
			return len(keys) < 60, nil
		})
		n := 0
		_ = tx.ForEachItemNamespace(func([]string) error { n++; return nil })
		return answer{keys, n, errText(err)}
	})
	rows := func(s Store) (out []string) {
		prefix := lgKey("t1", "", lgKindCheckpoint, "")
		if err := s.ViewCheckpointRows(context.Background(), "", func(lg checkpointRows) error {
			lg.scan(prefix, func(k, _ []byte) bool { out = append(out, string(k)); return len(out) < 40 })
			lg.scanBack(prefix, lgKey("t1", "", lgKindCheckpoint, "050"), func(k, _ []byte) bool {
				out = append(out, string(k))
				return len(out) < 80
			})
			k, _ := lg.last(prefix)
			out = append(out, string(k), string(lg.get(lgKey("t1", "", lgKindCheckpoint, "007"))))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got, want := rows(pg), rows(bs); !reflect.DeepEqual(got, want) {
		t.Errorf("checkpoint rows scanned:\n pg   %q\n bolt %q", got, want)
	}
	// Past the residual bound both refuse the search the same way.
	defer func(n int) { maxResidualScan = n }(maxResidualScan)
	maxResidualScan = 10
	compare("a residual filter past the bound", func(tx ReadTx) answer {
		rs, err := tx.SearchThreads(ThreadFilter{Values: map[string]any{"v": 9.0}})
		_, aerr := tx.SearchAssistants(AssistantQuery{Name: "zzz"})
		return answer{nil, len(rs), errText(errors.Join(err, aerr))}
	})
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
