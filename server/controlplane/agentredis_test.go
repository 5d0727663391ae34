package controlplane

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"slipway/server/servertest"
)

// TestAgentRedisUser provisions two deployments' users on a real Redis
// and checks what an agent may do with one: its own prefix's strings with
// expiry, streams, lists (the run bus's wake-ups: LPUSH, LTRIM and
// PEXPIRE in a MULTI, BRPOP), channels and scripts on its keys work (the
// agent's run bus appends in a script); another prefix's keys (BRPOP
// too) and channels, also from
// a script, FLUSHALL, CONFIG, KEYS, SCAN and SCRIPT are refused; dropping the user
// leaves neither the user nor a key under its prefix, and leaves the
// other deployment's keys alone.
func TestAgentRedisUser(t *testing.T) {
	admin := servertest.RedisAdminURL(t)
	rc := &Reconciler{RedisURL: admin}
	ctx := context.Background()
	type dep struct{ user, prefix, password, url string }
	mk := func() dep {
		t.Helper()
		user, prefix, err := agentRedisNames(uuid.NewString())
		if err != nil {
			t.Fatal(err)
		}
		d := dep{user: user, prefix: prefix, password: rand.Text()}
		if err := rc.ensureAgentRedis(ctx, user, prefix, d.password); err != nil {
			t.Fatal(err)
		}
		// Twice: provisioning is repeated at every deploy and restore.
		if err := rc.ensureAgentRedis(ctx, user, prefix, d.password); err != nil {
			t.Fatal(err)
		}
		if d.url, err = agentRedisURL(admin, user, d.password); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rc.dropAgentRedis(context.Background(), user, prefix) })
		return d
	}
	a, b := mk(), mk()
	ac := servertest.RedisClient(t, admin)
	if err := ac.Set(ctx, b.prefix+"secret", "b's", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	c := servertest.RedisClient(t, a.url)
	if who, err := c.Do(ctx, "acl", "whoami").Text(); err == nil || who == "default" {
		t.Fatalf("ACL WHOAMI answered %q (%v): the agent should not run ACL commands", who, err)
	}
	sub := c.Subscribe(ctx, a.prefix+"wake")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatalf("subscribe to its own channel: %v", err)
	}
	for name, op := range map[string]func() error{
		"set with expiry": func() error { return c.Set(ctx, a.prefix+"k", "v", time.Minute).Err() },
		"get":             func() error { return c.Get(ctx, a.prefix+"k").Err() },
		"expire":          func() error { return c.Expire(ctx, a.prefix+"k", time.Hour).Err() },
		"xadd": func() error {
			return c.XAdd(ctx, &redis.XAddArgs{Stream: a.prefix + "run:1", Values: map[string]any{"event": "x"}}).Err()
		},
		"xread": func() error {
			return c.XRead(ctx, &redis.XReadArgs{Streams: []string{a.prefix + "run:1", "0"}, Count: 1, Block: -1}).Err()
		},
		"publish": func() error { return c.Publish(ctx, a.prefix+"wake", "1").Err() },
		// The run bus's wake-ups: a capped, expiring list one worker pops.
		"queue a wake-up": func() error {
			_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.LPush(ctx, a.prefix+"wakeups", "thread")
				p.LTrim(ctx, a.prefix+"wakeups", 0, 99)
				p.PExpire(ctx, a.prefix+"wakeups", time.Minute)
				return nil
			})
			return err
		},
		"brpop":  func() error { return c.BRPop(ctx, time.Second, a.prefix+"wakeups").Err() },
		"unlink": func() error { return c.Unlink(ctx, a.prefix+"gone").Err() },
		"eval on its keys": func() error {
			return c.Eval(ctx, "return redis.call('SET', KEYS[1], 'v')", []string{a.prefix + "s"}).Err()
		},
	} {
		// redis.Nil: allowed, nothing there yet (the map's order is random).
		if err := op(); err != nil && !errors.Is(err, redis.Nil) {
			t.Errorf("%s on its own prefix: %v", name, err)
		}
	}
	for name, op := range map[string]func() error{
		"get another prefix": func() error { return c.Get(ctx, b.prefix+"secret").Err() },
		"set another prefix": func() error { return c.Set(ctx, b.prefix+"x", "1", 0).Err() },
		"publish another prefix": func() error {
			return c.Publish(ctx, b.prefix+"wake", "1").Err()
		},
		"brpop another prefix": func() error { return c.BRPop(ctx, time.Second, b.prefix+"wakeups").Err() },
		"flushall":             func() error { return c.FlushAll(ctx).Err() },
		"flushdb":              func() error { return c.FlushDB(ctx).Err() },
		"config get":           func() error { return c.ConfigGet(ctx, "*").Err() },
		"config set":           func() error { return c.ConfigSet(ctx, "maxmemory", "1").Err() },
		"keys":                 func() error { return c.Keys(ctx, "*").Err() },
		"scan":                 func() error { return c.Scan(ctx, 0, "*", 10).Err() },
		"eval on another prefix": func() error {
			return c.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{b.prefix + "secret"}).Err()
		},
		"script reaching another prefix": func() error {
			return c.Eval(ctx, "return redis.call('GET', ARGV[1])", []string{a.prefix + "k"}, b.prefix+"secret").Err()
		},
		"script calling flushall": func() error { return c.Eval(ctx, "return redis.call('FLUSHALL')", nil).Err() },
		"script flush":            func() error { return c.ScriptFlush(ctx).Err() },
		"client list":             func() error { return c.ClientList(ctx).Err() },
		"acl setuser":             func() error { return c.Do(ctx, "acl", "setuser", a.user, "+@all").Err() },
	} {
		// A command refused outright says NOPERM; one a script calls fails
		// the script with Redis's ACL message for scripts.
		if err := op(); err == nil || !strings.Contains(err.Error(), "NOPERM") && !strings.Contains(err.Error(), "The user executing the script can't") {
			t.Errorf("%s: %v, want an ACL refusal", name, err)
		}
	}
	if v, err := ac.Get(ctx, b.prefix+"secret").Result(); err != nil || v != "b's" {
		t.Fatalf("the other deployment's key: %q, %v", v, err)
	}

	// Deleted: no user, no key under its prefix; the other's untouched.
	if err := rc.dropAgentRedis(ctx, a.user, a.prefix); err != nil {
		t.Fatal(err)
	}
	if users, keys := servertest.RedisLeft(t, ac, a.user, a.prefix); users != 0 || keys != 0 {
		t.Fatalf("after the drop: %d users, %d keys left", users, keys)
	}
	if users, keys := servertest.RedisLeft(t, ac, b.user, b.prefix); users != 1 || keys != 1 {
		t.Fatalf("the other deployment: %d users, %d keys, want 1 and 1", users, keys)
	}
	if err := servertest.RedisClient(t, a.url).Ping(ctx).Err(); err == nil {
		t.Fatal("the dropped user still logs in")
	}
	// Dropping again (a retried deletion) is fine.
	if err := rc.dropAgentRedis(ctx, a.user, a.prefix); err != nil {
		t.Fatal(err)
	}
}

func TestAgentRedisURL(t *testing.T) {
	for _, tc := range []struct{ admin, want string }{
		{"redis://default:adm1n@cache.example:6379/2", "redis://slipway-dep-x:pw@cache.example:6379/2"},
		{"rediss://adm:adm1n@cache.example:6380?username=adm&dial_timeout=3s", "rediss://slipway-dep-x:pw@cache.example:6380?dial_timeout=3s"},
		{"redis://127.0.0.1:6379", "redis://slipway-dep-x:pw@127.0.0.1:6379"},
	} {
		got, err := agentRedisURL(tc.admin, "slipway-dep-x", "pw")
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.admin, got, err, tc.want)
		}
	}
}
