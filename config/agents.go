package config

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// checkAgentsOrigin validates SLIPWAY_AGENTS_URL and SLIPWAY_AGENTS_ADDR,
// the separate origin deployments' agents are served on. A URL given
// without an address is routed by its Host header on SLIPWAY_ADDR (a TLS
// proxy in front sends both host names there); an address given without a
// URL names the URL as the public URL's default is named, from the address.
func (c *Serve) checkAgentsOrigin() error {
	if c.AgentsAddr != "" {
		if _, _, err := net.SplitHostPort(c.AgentsAddr); err != nil {
			return &Error{fmt.Sprintf("SLIPWAY_AGENTS_ADDR: %q is not host:port: %v", c.AgentsAddr, err)}
		}
		if c.AgentsAddr == c.Addr {
			return &Error{"SLIPWAY_AGENTS_ADDR: must differ from SLIPWAY_ADDR (the agents origin is another listener)"}
		}
		if c.AgentsURL == "" {
			c.AgentsURL = defaultURL(c.AgentsAddr)
		}
	}
	if c.AgentsURL == "" {
		return nil
	}
	c.AgentsURL = strings.TrimRight(c.AgentsURL, "/")
	bad := func(why string) error {
		return &Error{fmt.Sprintf("SLIPWAY_AGENTS_URL: %q %s", c.AgentsURL, why)}
	}
	u, err := url.Parse(c.AgentsURL)
	switch {
	case err != nil:
		return bad("is not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return bad("must start with http:// or https://")
	case u.Hostname() == "":
		return bad("has no host")
	case u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(u.Host, ":"):
		return bad("must be an origin only: scheme, host and optional port, e.g. https://agents.example.com")
	}
	pub, err := url.Parse(c.PublicURL)
	if err == nil && SameOrigin(u, pub) {
		return bad("is SLIPWAY_PUBLIC_URL's origin: agents need another host name (recommended) or port")
	}
	return nil
}

// defaultURL is http://addr, with a wildcard host replaced by 127.0.0.1.
func defaultURL(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// SameOrigin reports whether a and b are one web origin: scheme, host
// (case and a trailing dot aside) and port, the scheme's default when
// none is given.
func SameOrigin(a, b *url.URL) bool {
	host := func(u *url.URL) string { return strings.ToLower(strings.TrimSuffix(u.Hostname(), ".")) }
	return strings.EqualFold(a.Scheme, b.Scheme) && host(a) == host(b) && Port(a) == Port(b)
}

// Port is u's port, or its scheme's default.
func Port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}
