package config

import (
	"fmt"
	"net"
)

// Metrics configures the Prometheus endpoint of `slipway serve`: a listener
// of its own, off unless Addr is set, where every scrape must carry the
// bearer token (README, "Metrics", says why).
type Metrics struct {
	// Addr is where /metrics is served (host:port); empty: no metrics
	// are collected or served.
	Addr string `env:"SLIPWAY_METRICS_ADDR"`
	// TokenFile holds the bearer token scrapes must send; empty: the
	// token Slipway keeps in <data dir>/metrics-token, made on first start.
	TokenFile string `env:"SLIPWAY_METRICS_TOKEN_FILE"`
}

// Enabled reports whether metrics are collected and served.
func (m Metrics) Enabled() bool { return m.Addr != "" }

func (m Metrics) check() error {
	if m.Addr == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(m.Addr); err != nil {
		return &Error{fmt.Sprintf("SLIPWAY_METRICS_ADDR: %q is not host:port: %v", m.Addr, err)}
	}
	return nil
}
