package storage

import (
	"net/url"
	"strings"
)

// HostKey is the key of a deployment's custom_url in the idx_custom_host index: the
// URL's host name, lowercased, without trailing dots and without a port
// ("https://AGENT.example.com.:443/x" and "agent.example.com" are the same
// key), or "" when custom names no host. Requests are routed by the same
// key of their Host header, so two spellings of one host can never be held
// by two deployments.
func HostKey(custom string) string {
	raw := strings.TrimSpace(custom)
	if raw == "" {
		return ""
	}
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return strings.ToLower(strings.TrimRight(u.Hostname(), "."))
}
