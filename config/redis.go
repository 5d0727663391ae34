package config

import (
	"fmt"
	"net/url"
)

// Redis is the Redis server Slipway provisions scaled deployments' Redis
// on: one ACL user, restricted to one key and channel prefix, per
// deployment. Empty: no deployment can run more than one agent process.
type Redis struct {
	// RedisURL is an admin URL (redis://user:password@host:port/db, or
	// rediss:// for TLS) of a user that may run ACL SETUSER/DELUSER, SCAN
	// and UNLINK on every key. It holds a password: it is never logged
	// nor quoted in an error.
	RedisURL string `env:"SLIPWAY_REDIS_URL"`
}

// check refuses a setting that is not a redis:// or rediss:// URL with a
// host; the error names what is wrong, never the URL itself.
func (r Redis) check() error {
	if r.RedisURL == "" {
		return nil
	}
	u, err := url.Parse(r.RedisURL)
	if err != nil {
		return &Error{"SLIPWAY_REDIS_URL: not a URL (redis://user:password@host:port/db or rediss://...)"}
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return &Error{fmt.Sprintf("SLIPWAY_REDIS_URL: scheme %q is not redis or rediss", u.Scheme)}
	}
	if u.Hostname() == "" {
		return &Error{"SLIPWAY_REDIS_URL: names no host (the agents connect to it over the network)"}
	}
	return nil
}
