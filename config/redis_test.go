package config

import (
	"strings"
	"testing"
)

func TestRedisURLSetting(t *testing.T) {
	for _, tc := range []struct {
		url     string
		wantErr bool
	}{
		{url: ""},
		{url: "redis://default:pw-s3cret@cache.example:6379/0"},
		{url: "rediss://admin:pw-s3cret@10.0.0.5:6380"},
		{url: "redis://127.0.0.1:6379"},
		{url: "postgres://admin:pw-s3cret@db.example/x", wantErr: true},
		{url: "unix:///run/redis.sock?password=pw-s3cret", wantErr: true},
		{url: "redis:///0?password=pw-s3cret", wantErr: true},
		{url: "redis://admin:pw-s3cret@cache.example:port/0", wantErr: true},
	} {
		c, err := LoadServe(map[string]string{"SLIPWAY_REDIS_URL": tc.url})
		if tc.wantErr {
			if err == nil || !strings.Contains(err.Error(), "SLIPWAY_REDIS_URL") || strings.Contains(err.Error(), "pw-s3cret") {
				t.Errorf("%q: error %v, want one naming SLIPWAY_REDIS_URL without its password", tc.url, err)
			}
			continue
		}
		if err != nil || c.RedisURL != tc.url {
			t.Errorf("%q: %v, setting %q", tc.url, err, c.RedisURL)
		}
	}
}
