package agent

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"slipway/storage"
)

// BenchmarkCrossProcessMessage measures what the run bus's choice rests
// on (README, "Replicas"): the time from one process sending a message
// to another hearing it (a cancellation through Redis PUBLISH, a wake-up
// through the Redis list a worker blocked in BRPOP pops, either through
// PostgreSQL NOTIFY); and the time to append one stream event where
// every replica can read it back from any id, a Redis Stream XADD (the
// bus's fenced script) and a PostgreSQL insert with its NOTIFY in one
// transaction.
func BenchmarkCrossProcessMessage(b *testing.B) {
	ctx := context.Background()
	b.Run("cancel/redis-publish", func(b *testing.B) {
		bus := redisBenchBus(b)
		heard := make(chan string, 1)
		lctx, stop := context.WithCancel(ctx)
		defer stop()
		if err := bus.Listen(lctx, func(run, _ string) { heard <- run }); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for b.Loop() {
			if err := bus.Cancel(ctx, "r", StrategyInterrupt); err != nil {
				b.Fatal(err)
			}
			<-heard
		}
	})
	b.Run("wake/redis-list", func(b *testing.B) {
		// A worker blocked in BRPOP, as takeWakes is, takes each wake-up.
		bus := redisBenchBus(b)
		heard := make(chan string, 1)
		lctx, stop := context.WithCancel(ctx)
		defer stop()
		go func() {
			for lctx.Err() == nil {
				if th, err := bus.TakeWake(lctx, time.Second); err == nil && th != "" {
					heard <- th
				}
			}
		}()
		b.ResetTimer()
		for b.Loop() {
			if err := bus.Wake(ctx, "t"); err != nil {
				b.Fatal(err)
			}
			<-heard
		}
	})
	b.Run("wake/postgres-notify", func(b *testing.B) {
		cfg := pgTestSchema(b)
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer pool.Close()
		ln, err := pgx.ConnectConfig(ctx, cfg.ConnConfig.Copy())
		if err != nil {
			b.Fatal(err)
		}
		defer ln.Close(ctx)
		if _, err := ln.Exec(ctx, "listen bench_wake"); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for b.Loop() {
			if _, err := pool.Exec(ctx, "select pg_notify('bench_wake', 't')"); err != nil {
				b.Fatal(err)
			}
			if _, err := ln.WaitForNotification(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("event/redis-xadd", func(b *testing.B) {
		bus := redisBenchBus(b)
		run := storage.NewID().String()
		if _, err := bus.Begin(ctx, run, 1); err != nil {
			b.Fatal(err)
		}
		id := 0
		b.ResetTimer()
		for b.Loop() {
			id++
			if err := bus.Append(ctx, run, 1, []StreamEvent{{ID: id, Event: "custom", Data: []byte(`{"tick":1}`)}}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("event/postgres-insert-notify", func(b *testing.B) {
		cfg := pgTestSchema(b)
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer pool.Close()
		if _, err := pool.Exec(ctx, "create table bench_events (run_id text, id int, event text, data jsonb, primary key (run_id, id))"); err != nil {
			b.Fatal(err)
		}
		run := storage.NewID().String()
		id := 0
		b.ResetTimer()
		for b.Loop() {
			id++
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, "insert into bench_events values ($1, $2, 'custom', '{\"tick\":1}')", run, id); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, "select pg_notify('bench_events', $1)", run)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

func redisBenchBus(b *testing.B) *redisBus {
	b.Helper()
	bus, err := OpenRedisBus(context.Background(), redisTestURL(), "slipwaybench:"+storage.NewID().String()+":")
	if err != nil {
		b.Skip("needs a Redis server (SLIPWAY_TEST_REDIS_URL)")
	}
	rb := bus.(*redisBus)
	b.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		iter := rb.rdb.Scan(c, 0, rb.prefix+"*", 1000).Iterator()
		for iter.Next(c) {
			rb.rdb.Del(c, iter.Val())
		}
		_ = rb.Close()
	})
	return rb
}
