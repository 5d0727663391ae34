package controlplane

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

func TestAgentDBName(t *testing.T) {
	safe := regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)
	for _, tc := range []struct {
		id, want string
		bad      bool
	}{
		{id: "0b1f2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", want: "slipway_dep_0b1f2c3d4e5f4a6b8c7d9e0f1a2b3c4d"},
		{id: "0B1F2C3D-4E5F-4A6B-8C7D-9E0F1A2B3C4D", want: "slipway_dep_0b1f2c3d4e5f4a6b8c7d9e0f1a2b3c4d"},
		{id: "robert'); drop table students;--", bad: true},
		{id: "", bad: true},
	} {
		got, err := agentDBName(tc.id)
		if tc.bad {
			if err == nil {
				t.Errorf("%q: got %q, want an error", tc.id, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: got %q, %v; want %q", tc.id, got, err, tc.want)
		}
		if len(got) > 63 || !safe.MatchString(got) {
			t.Errorf("%q: %q is not a plain PostgreSQL identifier", tc.id, got)
		}
	}
}

func TestAgentDBURL(t *testing.T) {
	const name, pw = "slipway_dep_0b1f2c3d4e5f4a6b8c7d9e0f1a2b3c4d", "p@ss/w:rd?&#"
	for _, tc := range []struct {
		admin    string
		maxConns int
		host     string
		port     uint16
		params   map[string]string // runtime/TLS settings that must be kept
		pool     int32             // 0: pgxpool's default
	}{
		{admin: "postgres://admin:secret@db.example:6543/postgres?sslmode=disable", host: "db.example", port: 6543},
		{admin: "postgresql://admin@10.0.0.5/postgres?sslmode=disable&application_name=x&user=other&password=leak&dbname=other&search_path=s",
			maxConns: 7, host: "10.0.0.5", port: 5432, params: map[string]string{"application_name": "x"}, pool: 7},
		{admin: "postgres://admin:secret@[::1]:5433/postgres?sslmode=disable&pool_max_conns=99", maxConns: 3, host: "::1", port: 5433, pool: 3},
	} {
		u, err := agentDBURL(tc.admin, name, pw, tc.maxConns)
		if err != nil {
			t.Fatalf("%s: %v", tc.admin, err)
		}
		if strings.Contains(u, "secret") || strings.Contains(u, "admin") || strings.Contains(u, "leak") || strings.Contains(u, "search_path") {
			t.Errorf("%s: the admin's credentials or settings leaked into %q", tc.admin, u)
		}
		cfg, err := pgxpool.ParseConfig(u)
		if err != nil {
			t.Fatalf("%s: the agent cannot parse %q: %v", tc.admin, u, err)
		}
		cc := cfg.ConnConfig
		if cc.User != name || cc.Password != pw || cc.Database != name || cc.Host != tc.host || cc.Port != tc.port {
			t.Errorf("%s: got user %q password %q database %q host %q port %d", tc.admin, cc.User, cc.Password, cc.Database, cc.Host, cc.Port)
		}
		for k, v := range tc.params {
			if cc.RuntimeParams[k] != v {
				t.Errorf("%s: parameter %s = %q, want %q", tc.admin, k, cc.RuntimeParams[k], v)
			}
		}
		if tc.pool != 0 && cfg.MaxConns != tc.pool {
			t.Errorf("%s: pool of %d, want %d", tc.admin, cfg.MaxConns, tc.pool)
		}
		if tc.pool == 0 && strings.Contains(u, "pool_max_conns") {
			t.Errorf("%s: pool bounded without db_max_connections: %q", tc.admin, u)
		}
	}
}

func TestLoopbackHost(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want bool
	}{
		{"postgres://a:b@127.0.0.1:5432/x", true},
		{"postgres://a:b@localhost/x", true},
		{"postgres://a:b@[::1]:5432/x", true},
		{"postgres://a:b@127.8.9.10/x", true},
		{"postgres://a:b@172.17.0.1:5432/x", false},
		{"postgres://a:b@db.internal/x", false},
	} {
		if got := loopbackHost(tc.url); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.url, got, tc.want)
		}
	}
}

func TestReachWarning(t *testing.T) {
	for _, tc := range []struct {
		driver, url string
		warn        bool
	}{
		{"docker", "postgres://a:b@127.0.0.1:5432/x", true},
		{"docker", "postgres://a:b@localhost/x", true},
		{"docker", "postgres://a:b@172.17.0.1:5432/x", false},
		{"swarm", "postgres://a:b@127.0.0.1:5432/x", true},
		{"process", "postgres://a:b@127.0.0.1:5432/x", false},
		{"fake", "postgres://a:b@localhost/x", false},
	} {
		w := reachWarning(tc.driver, tc.url)
		if (w != "") != tc.warn || strings.Contains(w, ":b@") {
			t.Errorf("%s %s: %q", tc.driver, tc.url, w)
		}
	}
}

// TestScramVerifier recomputes the verifier from its salt and iterations
// as PostgreSQL does when checking a client's proof (RFC 5802).
func TestScramVerifier(t *testing.T) {
	v, err := scramVerifier("correct horse")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`^SCRAM-SHA-256\$(\d+):([A-Za-z0-9+/=]+)\$([A-Za-z0-9+/=]+):([A-Za-z0-9+/=]+)$`).FindStringSubmatch(v)
	if m == nil || strings.Contains(v, "correct horse") {
		t.Fatalf("not a SCRAM-SHA-256 verifier: %q", v)
	}
	iter, _ := strconv.Atoi(m[1])
	salt, _ := base64.StdEncoding.DecodeString(m[2])
	for _, tc := range []struct {
		password string
		match    bool
	}{{"correct horse", true}, {"correct horsf", false}} {
		salted, _ := pbkdf2.Key(sha256.New, tc.password, salt, iter, 32)
		h := hmac.New(sha256.New, salted)
		h.Write([]byte("Client Key"))
		stored := sha256.Sum256(h.Sum(nil))
		if got := base64.StdEncoding.EncodeToString(stored[:]) == m[3]; got != tc.match {
			t.Errorf("%q: stored key matches %v, want %v", tc.password, got, tc.match)
		}
	}
	if w, _ := scramVerifier("correct horse"); w == v {
		t.Error("two verifiers of one password share their salt")
	}
}

func TestQuoteLiteral(t *testing.T) {
	for in, want := range map[string]string{"abc": "'abc'", "it's": "'it''s'", "''": "''''''"} {
		if got := quoteLiteral(in); got != want {
			t.Errorf("%q: %s, want %s", in, got, want)
		}
	}
}
