package track

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// ClientAddress returns the client's address: the peer, or, when the peer
// is a trusted proxy, the nearest untrusted hop of X-Forwarded-For (so a
// client cannot forge its address by sending the header itself).
func ClientAddress(r *http.Request, trusted []netip.Prefix) (ip string, port int, hops []string) {
	host, p, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	port, _ = strconv.Atoi(p)
	peer, err := netip.ParseAddr(host)
	if err != nil || !isTrusted(peer, trusted) {
		return host, port, nil
	}
	var chain []string
	for _, h := range r.Header.Values("X-Forwarded-For") {
		for _, part := range strings.Split(h, ",") {
			if s := strings.TrimSpace(part); s != "" {
				chain = append(chain, s)
			}
		}
	}
	// Walk from the nearest hop back; stop at the first untrusted address.
	client := host
	for i := len(chain) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(chain[i])
		if err != nil {
			break
		}
		client = a.String()
		if !isTrusted(a, trusted) {
			break
		}
	}
	if client == host {
		return host, port, chain
	}
	return client, 0, append(chain, host)
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a.Unmap()) {
			return true
		}
	}
	return false
}
