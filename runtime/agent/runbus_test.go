package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"slipway/storage"
)

// redisTestBus is a RunBus on SLIPWAY_TEST_REDIS_URL (default
// redis://127.0.0.1:6379) under a fresh prefix, whose keys are deleted
// when the test ends; without a Redis that answers PING the test skips,
// or fails under CI=true (where .ci/run starts one).
func redisTestBus(t *testing.T) *redisBus {
	t.Helper()
	url := redisTestURL()
	prefix := "slipwaytest:" + strings.ReplaceAll(storage.NewID().String(), "-", "") + ":"
	bus, err := OpenRedisBus(context.Background(), url, prefix)
	if err != nil {
		msg := "the run bus tests need a Redis server (SLIPWAY_TEST_REDIS_URL, default redis://127.0.0.1:6379)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg + "; under CI=true this fails instead")
	}
	b := bus.(*redisBus)
	t.Cleanup(func() {
		ctx := context.Background()
		iter := b.rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			b.rdb.Del(ctx, iter.Val())
		}
		_ = b.Close()
	})
	return b
}

// redisTestURL is SLIPWAY_TEST_REDIS_URL, by default the local server.
func redisTestURL() string {
	if url := os.Getenv("SLIPWAY_TEST_REDIS_URL"); url != "" {
		return url
	}
	return "redis://127.0.0.1:6379"
}

func busEvents(ids ...int) []StreamEvent {
	out := make([]StreamEvent, len(ids))
	for i, id := range ids {
		out[i] = StreamEvent{ID: id, Event: "custom", Data: []byte(fmt.Sprintf(`{"n":%d}`, id))}
	}
	return out
}

func eventIDs(evs []StreamEvent) []int {
	out := make([]int, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

// TestRedisBusStreamFencedByAttempt: a run's stream resumes from any event
// id, a retried attempt continues after the last id, and once it has
// begun, the earlier attempt's appends and end are refused.
func TestRedisBusStreamFencedByAttempt(t *testing.T) {
	b := redisTestBus(t)
	ctx := context.Background()
	run := storage.NewID().String()
	if last, err := b.Begin(ctx, run, 1); err != nil || last != 0 {
		t.Fatalf("begin attempt 1: %d %v", last, err)
	}
	if err := b.Append(ctx, run, 1, busEvents(1, 2, 3)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		after int
		want  string
	}{{0, "[1 2 3]"}, {2, "[3]"}} {
		evs, done, err := b.Read(ctx, run, c.after, 10*time.Millisecond)
		if err != nil || done || sprint(eventIDs(evs)) != c.want {
			t.Fatalf("read after %d: %v %v %v, want %s", c.after, eventIDs(evs), done, err, c.want)
		}
	}
	last, err := b.Begin(ctx, run, 2)
	if err != nil || last != 3 {
		t.Fatalf("begin attempt 2: last %d %v, want 3", last, err)
	}
	if err := b.Append(ctx, run, 1, busEvents(4)); !errors.Is(err, errBusFenced) {
		t.Fatalf("the stale attempt's append: %v, want fenced", err)
	}
	if err := b.End(ctx, run, 1); !errors.Is(err, errBusFenced) {
		t.Fatalf("the stale attempt's end: %v, want fenced", err)
	}
	if err := b.Append(ctx, run, 2, busEvents(4, 5)); err != nil {
		t.Fatal(err)
	}
	if err := b.End(ctx, run, 2); err != nil {
		t.Fatal(err)
	}
	evs, done, err := b.Read(ctx, run, 3, 10*time.Millisecond)
	if err != nil || !done || sprint(eventIDs(evs)) != "[4 5]" {
		t.Fatalf("read after 3: %v %v %v, want [4 5] and the end", eventIDs(evs), done, err)
	}
	if evs, done, _ := b.Read(ctx, run, 5, 10*time.Millisecond); !done || len(evs) != 0 {
		t.Fatalf("read after the last: %v %v, want the end", eventIDs(evs), done)
	}
	ttl, err := b.rdb.PTTL(ctx, b.events(run)).Result()
	if err != nil || ttl <= 0 || ttl > streamKept {
		t.Fatalf("an ended stream's expiry: %v %v, want at most %v", ttl, err, streamKept)
	}
}

// TestRedisBusWakesAndCancels: every listener hears a cancellation
// published after Listen returned; a wake-up is taken by exactly one of
// several workers waiting for one; and
// another deployment's prefix is another world for both.
func TestRedisBusWakesAndCancels(t *testing.T) {
	b := redisTestBus(t)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	cancels := make(chan string, 4)
	for range 2 {
		if err := b.Listen(ctx, func(run, action string) { cancels <- run + " " + action }); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Cancel(ctx, "run-1", StrategyRollback); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		select {
		case got := <-cancels:
			if got != "run-1 rollback" {
				t.Fatalf("heard %q, want run-1 rollback", got)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("listener %d of 2 did not hear the cancellation", i+1)
		}
	}

	// Three workers wait; two wake-ups are taken once each.
	taken := make(chan string, 8)
	for range 3 {
		go func() {
			th, err := b.TakeWake(ctx, time.Second)
			if err != nil {
				th = "error: " + err.Error()
			}
			taken <- th
		}()
	}
	time.Sleep(100 * time.Millisecond) // all three blocked in BRPOP
	for _, th := range []string{"thread-1", "thread-2"} {
		if err := b.Wake(ctx, th); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for range 3 {
		select {
		case th := <-taken:
			got = append(got, th)
		case <-time.After(5 * time.Second):
			t.Fatalf("a worker's TakeWake did not return within its block: %q so far", got)
		}
	}
	slices.Sort(got)
	if fmt.Sprint(got) != "[ thread-1 thread-2]" {
		t.Fatalf("the three workers took %q, want thread-1, thread-2 and nothing", got)
	}
	// Another deployment's prefix: neither its wake-ups nor its cancellations.
	other := &redisBus{rdb: b.rdb, prefix: b.prefix + "other:"}
	if err := other.Wake(ctx, "thread-3"); err != nil {
		t.Fatal(err)
	}
	if err := other.Cancel(ctx, "run-2", StrategyInterrupt); err != nil {
		t.Fatal(err)
	}
	if th, err := b.TakeWake(ctx, time.Second); err != nil || th != "" {
		t.Fatalf("took %q (%v), another prefix's wake-up", th, err)
	}
	select {
	case got := <-cancels:
		t.Fatalf("heard another prefix's cancellation %q", got)
	case <-time.After(200 * time.Millisecond):
	}
	if n, err := b.rdb.PTTL(ctx, other.wakeups()).Result(); err != nil || n <= 0 || n > wakeKept {
		t.Fatalf("the wake-up list's expiry: %v %v, want at most %v", n, err, wakeKept)
	}
}

// TestClaimFenceRefusesAStaleAttempt: once a run is under a newer
// attempt's claim (its lease expired and another worker took it over), a
// checkpoint write made under the older claim is refused.
func TestClaimFenceRefusesAStaleAttempt(t *testing.T) {
	s := openPGTestStore(t)
	ctx := context.Background()
	thread, run := storage.NewID().String(), storage.NewID().String()
	now := time.Now().UTC()
	err := s.Update(ctx, func(tx Tx) error {
		if err := tx.PutThread(&threadRecord{Thread: Thread{ThreadID: thread, CreatedAt: now, UpdatedAt: now, Status: ThreadBusy,
			Metadata: map[string]any{}, Values: map[string]any{}}, Active: run}); err != nil {
			return err
		}
		if err := tx.PutRun(&runRecord{Run: Run{RunID: run, ThreadID: thread, Status: RunRunning, CreatedAt: now, UpdatedAt: now},
			Attempt: 2, Lease: &runLease{Worker: "worker-b", Until: now.Add(time.Minute)}}); err != nil {
			return err
		}
		return tx.IndexRun(thread, run)
	})
	if err != nil {
		t.Fatal(err)
	}
	row := func(id string) []cpRow {
		return []cpRow{{mode: rowPut, key: lgKey(thread, "", lgKindCheckpoint, id), val: []byte("x")}}
	}
	for _, c := range []struct {
		claim  attemptClaim
		fenced bool
	}{
		{attemptClaim{Worker: "worker-a", Attempt: 1}, true},  // the worker that lost the run
		{attemptClaim{Worker: "worker-b", Attempt: 1}, true},  // an older attempt of the same worker
		{attemptClaim{Worker: "worker-b", Attempt: 2}, false}, // the claim the run is under
	} {
		err := s.PutCheckpointRows(context.WithValue(ctx, claimKey{}, c.claim), thread, run, row(fmt.Sprint(c.claim.Worker, c.claim.Attempt)))
		if got := errors.Is(err, ErrFenced); got != c.fenced {
			t.Fatalf("%+v: %v, fenced %v", c.claim, err, c.fenced)
		}
	}
}

func sprint(ids []int) string { return fmt.Sprint(ids) }
