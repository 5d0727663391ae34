package hosts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// echoHandler answers "echo" with its params, "slow" after a delay, and
// anything else with an error; it records notifications.
type echoHandler struct {
	mu    sync.Mutex
	notes []string
}

func (h *echoHandler) Request(ctx context.Context, m string, p json.RawMessage) (any, error) {
	switch m {
	case "echo":
		return p, nil
	case "slow":
		select {
		case <-time.After(200 * time.Millisecond):
			return "slow done", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return nil, &Error{Type: "NotFound", Message: "no method " + m}
}

func (h *echoHandler) Notify(m string, p json.RawMessage) {
	h.mu.Lock()
	h.notes = append(h.notes, m+" "+string(p))
	h.mu.Unlock()
}

func pair(t *testing.T) (*Conn, *Conn, *echoHandler) {
	a, b := net.Pipe()
	hb := &echoHandler{}
	ca, cb := NewConn(a, &echoHandler{}), NewConn(b, hb)
	t.Cleanup(func() { ca.Close(); cb.Close() })
	return ca, cb, hb
}

// TestConnMultiplexing: many concurrent calls in both directions each get
// their own reply, a slow request does not hold up fast ones, errors keep
// their type, and notifications arrive in order.
func TestConnMultiplexing(t *testing.T) {
	ca, cb, hb := pair(t)
	ctx := context.Background()
	slow := make(chan error, 1)
	go func() {
		var s string
		err := ca.Call(ctx, "slow", nil, &s)
		if err == nil && s != "slow done" {
			err = fmt.Errorf("slow answered %q", s)
		}
		slow <- err
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 100 {
		for _, c := range []*Conn{ca, cb} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var out map[string]int
				if err := c.Call(ctx, "echo", map[string]int{"n": i}, &out); err != nil || out["n"] != i {
					errs <- fmt.Errorf("echo %d: %v %v", i, out, err)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	select {
	case err := <-slow:
		t.Fatalf("the slow call ended before the fast ones were all answered: %v", err)
	default:
	}
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	var pe *Error
	if err := ca.Call(ctx, "nope", nil, nil); !errors.As(err, &pe) || pe.Type != "NotFound" {
		t.Fatalf("unknown method: %v", err)
	}
	for i := range 5 {
		if err := ca.Notify("event", i); err != nil {
			t.Fatal(err)
		}
	}
	// A call after the notifications is answered after they were handled.
	if err := ca.Call(ctx, "echo", 1, nil); err != nil {
		t.Fatal(err)
	}
	hb.mu.Lock()
	defer hb.mu.Unlock()
	if fmt.Sprint(hb.notes) != "[event 0 event 1 event 2 event 3 event 4]" {
		t.Fatalf("notifications: %v", hb.notes)
	}
}

// TestConnClose: calls in flight fail when the other side goes away, and
// a cancelled call returns at once without breaking the connection.
func TestConnClose(t *testing.T) {
	ca, cb, _ := pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := ca.Call(ctx, "slow", nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled call: %v", err)
	}
	if err := ca.Call(context.Background(), "echo", 1, nil); err != nil {
		t.Fatalf("connection broken by a cancelled call: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- ca.Call(context.Background(), "slow", nil, nil) }()
	time.Sleep(20 * time.Millisecond)
	cb.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("call across a close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("call still waiting after the other side closed")
	}
	if err := ca.Call(context.Background(), "echo", 1, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("call on a closed connection: %v", err)
	}
}
