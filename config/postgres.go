package config

import (
	"fmt"
	"net/url"
)

// Postgres is the PostgreSQL server Slipway provisions deployments'
// agent databases on (one database and one login role per deployment).
// Empty: every agent keeps its state in its own bbolt file.
type Postgres struct {
	// PostgresURL is an admin URL (postgres://user:password@host:port/db?
	// sslmode=...) of a role that may CREATE ROLE and CREATE DATABASE. It
	// holds a password: it is never logged nor quoted in an error.
	PostgresURL string `env:"SLIPWAY_POSTGRES_URL"`
}

// check refuses a setting that is not a postgres:// URL with a host; the
// error names what is wrong, never the URL itself.
func (p Postgres) check() error {
	if p.PostgresURL == "" {
		return nil
	}
	u, err := url.Parse(p.PostgresURL)
	if err != nil {
		return &Error{"SLIPWAY_POSTGRES_URL: not a URL (postgres://user:password@host:port/database)"}
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return &Error{fmt.Sprintf("SLIPWAY_POSTGRES_URL: scheme %q is not postgres or postgresql", u.Scheme)}
	}
	if u.Hostname() == "" {
		return &Error{"SLIPWAY_POSTGRES_URL: names no host (the agents connect to it over the network)"}
	}
	return nil
}
