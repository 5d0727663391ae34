package runtime

import (
	"context"
	"testing"
	"time"
)

// TestGateHandoverEpochs: a request that passed the gate learns whether
// a handover of its deployment began since (and when), and of no other
// deployment's; Pass waits while the gate is closed and returns the new
// epoch once it opens.
func TestGateHandoverEpochs(t *testing.T) {
	var g Gate
	ctx := context.Background()
	before, err := g.Pass(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := g.Handover("a", before); ok {
		t.Fatal("a handover reported before any began")
	}
	began := time.Now()
	resume := g.Pause("a")
	since, ok := g.Handover("a", before)
	if !ok || since.Before(began) {
		t.Fatalf("handover since the pass: %v %v, want true, at or after %v", ok, since, began)
	}
	if _, ok := g.Handover("b", 0); ok {
		t.Fatal("another deployment's handover reported")
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := g.Pass(short, "a"); err == nil {
		t.Fatal("passed a closed gate")
	}
	time.AfterFunc(20*time.Millisecond, resume)
	after, err := g.Pass(ctx, "a")
	if err != nil || after != before+1 {
		t.Fatalf("pass after the handover: epoch %d, %v; want %d", after, err, before+1)
	}
	if _, ok := g.Handover("a", after); ok {
		t.Fatal("a request that passed after the handover sees it as later")
	}
}
