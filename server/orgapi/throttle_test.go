package orgapi

import (
	"fmt"
	"testing"
	"time"
)

// TestLoginThrottle drives the buckets with a clock the test moves.
func TestLoginThrottle(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	newThrottle := func() *LoginThrottle {
		return &LoginThrottle{PerAddress: Limit{Burst: 3, Window: 3 * time.Second},
			PerAccount: Limit{Burst: 5, Window: 5 * time.Second}, Now: func() time.Time { return now }}
	}
	fail := func(t *testing.T, th *LoginThrottle, addr, acct string) time.Duration {
		t.Helper()
		_, wait := th.Attempt(addr, acct)
		return wait
	}
	tests := []struct {
		name string
		run  func(t *testing.T, th *LoginThrottle)
	}{
		{"an address is throttled after its burst, briefly", func(t *testing.T, th *LoginThrottle) {
			for i := range 3 {
				if w := fail(t, th, "192.0.2.1", fmt.Sprintf("u%d@example.com", i)); w != 0 {
					t.Fatalf("attempt %d throttled", i)
				}
			}
			w := fail(t, th, "192.0.2.1", "other@example.com")
			if w <= 0 || w > time.Second {
				t.Fatalf("wait %s, want (0, 1s]", w)
			}
			now = now.Add(w)
			if fail(t, th, "192.0.2.1", "other@example.com") != 0 {
				t.Fatal("still throttled after the wait")
			}
		}},
		{"an account is throttled across addresses", func(t *testing.T, th *LoginThrottle) {
			for i := range 5 {
				if fail(t, th, fmt.Sprintf("192.0.2.%d", i), "ada@example.com") != 0 {
					t.Fatalf("attempt %d throttled", i)
				}
			}
			if fail(t, th, "192.0.2.99", "ada@example.com") == 0 {
				t.Fatal("sixth failure on the account let through")
			}
			if fail(t, th, "192.0.2.99", "bob@example.com") != 0 {
				t.Fatal("another account throttled")
			}
		}},
		{"refused attempts do not extend the lockout", func(t *testing.T, th *LoginThrottle) {
			for range 3 {
				fail(t, th, "192.0.2.1", "ada@example.com")
			}
			for range 1000 {
				if fail(t, th, "192.0.2.1", "ada@example.com") == 0 {
					t.Fatal("let through while throttled")
				}
			}
			now = now.Add(time.Second)
			if fail(t, th, "192.0.2.1", "ada@example.com") != 0 {
				t.Fatal("hammering extended the lockout")
			}
		}},
		{"successful logins do not count", func(t *testing.T, th *LoginThrottle) {
			for i := range 10 {
				p, w := th.Attempt("192.0.2.1", "ada@example.com")
				if w != 0 {
					t.Fatalf("login %d throttled", i)
				}
				p.Succeeded()
			}
		}},
		{"one address cannot exhaust an account", func(t *testing.T, th *LoginThrottle) {
			// The address bucket runs dry first, leaving the account room
			// for its owner elsewhere.
			for range 20 {
				fail(t, th, "198.51.100.7", "ada@example.com")
			}
			if fail(t, th, "192.0.2.1", "ada@example.com") != 0 {
				t.Fatal("the owner is locked out by one address")
			}
		}},
		{"full buckets are swept", func(t *testing.T, th *LoginThrottle) {
			for i := range sweepEvery {
				fail(t, th, "192.0.2.1", fmt.Sprintf("u%d@example.com", i))
				now = now.Add(time.Second)
			}
			now = now.Add(time.Hour)
			for i := range sweepEvery {
				fail(t, th, "192.0.2.2", fmt.Sprintf("v%d@example.com", i))
			}
			if n := len(th.buckets); n > sweepEvery+2 {
				t.Fatalf("%d buckets kept", n)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newThrottle()) })
	}
}

func TestRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{{0, 1}, {time.Millisecond, 1}, {time.Second, 1}, {1001 * time.Millisecond, 2}, {time.Minute, 60}} {
		if got := retryAfter(tc.d); got != tc.want {
			t.Errorf("retryAfter(%s) = %d, want %d", tc.d, got, tc.want)
		}
	}
}
