package server

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"slipway/runtime"
	"slipway/runtime/fake"
)

// balancer is a driver whose healthy API replicas the test sets.
type balancer struct {
	*fake.Driver
	eps []string
}

func (b *balancer) Endpoints(string) []string { return b.eps }

var _ runtime.Balancer = (*balancer)(nil)

// TestProxySpreadsOverReplicas: requests take a deployment's healthy API
// replicas in turn; one taken out gets none, and gets its share again once
// it is back.
func TestProxySpreadsOverReplicas(t *testing.T) {
	b := &balancer{Driver: fake.New(0), eps: []string{"http://a", "http://b"}}
	p := &proxy{driver: b}
	count := func(n int) map[string]int {
		got := map[string]int{}
		for range n {
			ep, ok := p.endpoint("dep")
			if !ok {
				t.Fatal("no endpoint")
			}
			got[ep]++
		}
		return got
	}
	if got := count(10); got["http://a"] != 5 || got["http://b"] != 5 {
		t.Fatalf("two replicas: %v, want 5 each", got)
	}
	b.eps = []string{"http://b"} // a failed its health check
	if got := count(4); got["http://b"] != 4 {
		t.Fatalf("one replica out: %v", got)
	}
	b.eps = []string{"http://a", "http://b", "http://c"}
	if got := count(9); got["http://a"] != 3 || got["http://b"] != 3 || got["http://c"] != 3 {
		t.Fatalf("back with a third: %v", got)
	}
	// Another deployment's turns are its own.
	if ep, _ := p.endpoint("other"); ep != "http://a" {
		t.Fatalf("another deployment starts at %q", ep)
	}
}

// TestProxyPassesOverUnreachableReplicas: a replica whose node went away
// stays in the balancer's list until its health check drops it, and a dial
// to it fails (here: refused). A request sent there is held and sent to
// another replica, and for unreachableFor the proxy takes the others
// first; with every replica unreachable it tries them all again.
func TestProxyPassesOverUnreachableReplicas(t *testing.T) {
	var served atomic.Int32
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	defer live.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // dials are refused from now on
	b := &balancer{Driver: fake.New(0), eps: []string{dead, live.URL}}
	p := &proxy{driver: b, gate: &runtime.Gate{}, handoverWait: time.Second, restartWait: 5 * time.Second, log: zerolog.Nop()}
	var toDead atomic.Int32
	relay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		epoch, err := p.gate.Pass(r.Context(), "dep")
		if err != nil {
			t.Error(err)
			return
		}
		ep, _ := p.endpoint("dep")
		if ep == dead {
			toDead.Add(1)
		}
		base, _, _ := agentURL(ep)
		if err := p.relay(w, r, target{dep: "dep", base: base, path: r.URL.Path, epoch: epoch}); err != nil {
			t.Error(err)
		}
	}))
	defer relay.Close()
	for i := range 10 {
		resp, err := http.Post(relay.URL+"/threads", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %d, want 200 from the live replica", i, resp.StatusCode)
		}
	}
	if n := served.Load(); n != 10 {
		t.Fatalf("the live replica served %d of 10", n)
	}
	if n := toDead.Load(); n != 1 {
		t.Fatalf("%d of 10 requests were first sent to the unreachable replica, want only the first", n)
	}
	// Both unreachable: neither is passed over.
	p.unreachable.mark(strings.TrimPrefix(live.URL, "http://"))
	got := map[string]int{}
	for range 4 {
		ep, _ := p.endpoint("dep")
		got[ep]++
	}
	if got[dead] != 2 || got[live.URL] != 2 {
		t.Fatalf("with every replica unreachable: %v, want both in turn", got)
	}
}
