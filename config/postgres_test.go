package config

import (
	"strings"
	"testing"
)

func TestPostgresURLSetting(t *testing.T) {
	for _, tc := range []struct {
		url     string
		wantErr bool
	}{
		{url: ""},
		{url: "postgres://admin:pw-s3cret@db.example:5432/postgres?sslmode=require"},
		{url: "postgresql://admin:pw-s3cret@10.0.0.5/postgres"},
		{url: "mysql://admin:pw-s3cret@db.example/x", wantErr: true},
		{url: "postgres:///postgres?host=/run/postgresql&password=pw-s3cret", wantErr: true}, // a socket: agents in containers cannot use it
		{url: "host=db.example password=pw-s3cret", wantErr: true},
		{url: "postgres://admin:pw-s3cret@db.example:port/x", wantErr: true},
	} {
		c, err := LoadServe(map[string]string{"SLIPWAY_POSTGRES_URL": tc.url})
		if tc.wantErr {
			if err == nil || !strings.Contains(err.Error(), "SLIPWAY_POSTGRES_URL") || strings.Contains(err.Error(), "pw-s3cret") {
				t.Errorf("%q: error %v, want one naming SLIPWAY_POSTGRES_URL without its password", tc.url, err)
			}
			continue
		}
		if err != nil || c.PostgresURL != tc.url {
			t.Errorf("%q: %v, setting %q", tc.url, err, c.PostgresURL)
		}
	}
}
