package servertest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisAdminURL is the Redis server tests provision deployments' users
// on: SLIPWAY_TEST_REDIS_URL, by default the local redis-server that
// .ci/run starts (redis://127.0.0.1:6379). A server that does not answer
// fails the test under CI=true and skips it elsewhere. Tests share the
// server: each uses its own deployments' prefixes and users only.
func RedisAdminURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("SLIPWAY_TEST_REDIS_URL")
	if u == "" {
		u = "redis://127.0.0.1:6379"
	}
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal("SLIPWAY_TEST_REDIS_URL is not a redis:// URL")
	}
	c := redis.NewClient(opt)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		missing(t, "provisioning agent Redis users needs a Redis server (SLIPWAY_TEST_REDIS_URL, default redis://127.0.0.1:6379): "+err.Error())
	}
	return u
}

// RedisClient is a client of url, closed when the test ends.
func RedisClient(t testing.TB, url string) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	opt.MaxRetries = -1 // a refused command is the answer, not a reason to retry
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

// RedisLeft counts what a deployment left on the Redis server: its ACL
// user (0 or 1) and the keys under its prefix.
func RedisLeft(t testing.TB, admin *redis.Client, user, prefix string) (users, keys int) {
	t.Helper()
	ctx := context.Background()
	list, err := admin.Do(ctx, "acl", "users").StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range list {
		if u == user {
			users++
		}
	}
	var cursor uint64
	for {
		ks, next, err := admin.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err != nil {
			t.Fatal(err)
		}
		keys += len(ks)
		if cursor = next; cursor == 0 {
			return users, keys
		}
	}
}
