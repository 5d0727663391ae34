package servertest

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// RedisPrefix answers SLIPWAY_TEST_REDIS_URL (default
// redis://127.0.0.1:6379) and a fresh key prefix on it, whose keys are
// deleted when the test ends: agents given them as SLIPWAY_AGENT_REDIS_URL
// and SLIPWAY_AGENT_REDIS_PREFIX share nothing with other tests. Without
// a Redis that answers PING the test skips, or fails under CI=true (.ci/run
// starts one).
func RedisPrefix(t testing.TB) (url, prefix string) {
	t.Helper()
	url = os.Getenv("SLIPWAY_TEST_REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379"
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal("SLIPWAY_TEST_REDIS_URL does not parse")
	}
	rdb := redis.NewClient(opt)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		missing(t, "the replica tests need a Redis server (SLIPWAY_TEST_REDIS_URL, default redis://127.0.0.1:6379) that answers PING")
	}
	prefix = "slipwaytest:" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16] + ":"
	t.Cleanup(func() {
		defer rdb.Close()
		ctx := context.Background()
		iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("delete the test's Redis keys: %v", err)
		}
	})
	return url, prefix
}

// RedisKeys counts the keys under prefix (a test's check of what an agent
// left in Redis).
func RedisKeys(t testing.TB, url, prefix string) int {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal("SLIPWAY_TEST_REDIS_URL does not parse")
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	keys, err := rdb.Keys(context.Background(), prefix+"*").Result()
	if err != nil {
		t.Fatalf("list the test's Redis keys: %v", err)
	}
	return len(keys)
}
