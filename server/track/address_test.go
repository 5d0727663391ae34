package track

import (
	"net/http/httptest"
	"net/netip"
	"testing"
)

func TestClientAddress(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	cases := []struct {
		name, remote, xff string
		trusted           []netip.Prefix
		wantIP            string
		wantHops          int
	}{
		{"direct", "203.0.113.5:4000", "", trusted, "203.0.113.5", 0},
		{"untrusted peer forges header", "203.0.113.5:4000", "1.2.3.4", trusted, "203.0.113.5", 0},
		{"trusted proxy", "10.0.0.2:4000", "198.51.100.7", trusted, "198.51.100.7", 2},
		{"chain through two proxies", "10.0.0.2:4000", "198.51.100.7, 10.1.1.1", trusted, "198.51.100.7", 3},
		{"client spoofs behind proxy", "10.0.0.2:4000", "6.6.6.6, 198.51.100.7", trusted, "198.51.100.7", 3},
		{"no trusted proxies", "10.0.0.2:4000", "198.51.100.7", nil, "10.0.0.2", 0},
		{"garbage header", "10.0.0.2:4000", "not-an-ip", trusted, "10.0.0.2", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tc.remote
			if tc.xff != "" {
				r.Header.Set("X-Forwarded-For", tc.xff)
			}
			ip, _, hops := ClientAddress(r, tc.trusted)
			if ip != tc.wantIP || len(hops) != tc.wantHops {
				t.Fatalf("ip %s hops %v, want %s and %d hops", ip, hops, tc.wantIP, tc.wantHops)
			}
		})
	}
}
