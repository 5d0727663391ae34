package server

import (
	"testing"

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
