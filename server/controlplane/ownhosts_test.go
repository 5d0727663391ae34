package controlplane

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzOwnHostSpellings: however a custom_url spells one of Slipway's own
// hosts (scheme, case, trailing dots, port, path), if it routes to that
// host (CustomHost is what requests are routed by) it is refused.
func FuzzOwnHostSpellings(f *testing.F) {
	s := &Service{OwnHosts: []string{"slipway.example.com", "agents.example.com", "10.0.0.5"}}
	hosts := append(s.OwnHosts, "localhost", "a.localhost", "127.0.0.1", "127.9.9.9", "::1", "0.0.0.0", "::")
	f.Add(uint8(0), "https", uint16(443), "/x", uint64(0), uint8(1))
	f.Add(uint8(2), "", uint16(0), "", uint64(3), uint8(0))
	f.Add(uint8(8), "http", uint16(8484), "?q", uint64(1), uint8(0))
	f.Fuzz(func(t *testing.T, which uint8, scheme string, port uint16, path string, upper uint64, dots uint8) {
		host := hosts[int(which)%len(hosts)]
		var b strings.Builder
		for i, r := range host {
			if upper>>(i%64)&1 == 1 {
				b.WriteString(strings.ToUpper(string(r)))
			} else {
				b.WriteRune(r)
			}
		}
		spelled := b.String() + strings.Repeat(".", int(dots%3))
		if strings.Contains(host, ":") {
			spelled = "[" + b.String() + "]"
		}
		if port != 0 {
			spelled += ":" + strconv.Itoa(int(port))
		}
		custom := spelled + path
		if scheme != "" {
			custom = scheme + "://" + custom
		}
		if CustomHost(custom) != host {
			return // the spelling names another host (a path with '@', a scheme with '/'...)
		}
		if s.refuseOwnHost(&custom) == nil {
			t.Fatalf("custom_url %q (host %q) reaches Slipway's %s but was accepted", custom, CustomHost(custom), host)
		}
	})
}
