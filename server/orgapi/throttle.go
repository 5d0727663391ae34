package orgapi

import (
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"slipway/server/httpx"
	"slipway/server/track"
)

// LoginThrottle limits failed logins with token buckets, one per client
// address and one per account (the normalized email, whether or not an
// account has it, so that throttling tells nothing about which exist).
// A bucket holds Burst attempts and refills at Burst per Window: a
// throttled caller waits at most Window/Burst for its next attempt, so a
// lockout is always temporary and short. A successful login gives its
// tokens back, so only failures count.
//
// It lives in memory: limits reset when the process restarts, and each
// host of several would throttle on its own.
type LoginThrottle struct {
	PerAddress Limit
	PerAccount Limit
	// Now is the clock (time.Now when nil); tests move it.
	Now func() time.Time

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
	inserts int
	// audited: account → when a throttled attempt on it was last
	// written to the audit log (AuditThrottled).
	audited map[string]time.Time
}

// Limit is a bucket's size and refill window.
type Limit struct {
	Burst  int
	Window time.Duration
}

func (l Limit) limiter() *rate.Limiter {
	return rate.NewLimiter(rate.Limit(float64(l.Burst)/l.Window.Seconds()), l.Burst)
}

// sweepEvery is how many new buckets are made between sweeps of full
// ones: the map holds only callers seen within about one window.
const sweepEvery = 1024

// Pass is a login attempt that the throttle let through.
type Pass struct {
	t    *LoginThrottle
	at   time.Time
	held []*rate.Reservation
}

// Succeeded gives the attempt's tokens back: a correct password never
// counts toward a lockout.
func (p *Pass) Succeeded() {
	for _, r := range p.held {
		r.CancelAt(p.at)
	}
}

// Attempt takes one token from the address's and the account's buckets.
// When either is empty it takes none and returns how long to wait.
func (t *LoginThrottle) Attempt(address, account string) (*Pass, time.Duration) {
	now := time.Now()
	if t.Now != nil {
		now = t.Now()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	pass := &Pass{t: t, at: now}
	var wait time.Duration
	for _, k := range []struct {
		key string
		lim Limit
	}{{"a\x00" + address, t.PerAddress}, {"u\x00" + account, t.PerAccount}} {
		r := t.bucket(k.key, k.lim, now).ReserveN(now, 1)
		if d := r.DelayFrom(now); !r.OK() || d > 0 {
			r.CancelAt(now)
			wait = max(wait, d, time.Second)
			continue
		}
		pass.held = append(pass.held, r)
	}
	if wait > 0 {
		pass.Succeeded() // give back what was taken: a refused attempt costs nothing more
		return nil, wait
	}
	return pass, 0
}

func (t *LoginThrottle) bucket(key string, l Limit, now time.Time) *rate.Limiter {
	if t.buckets == nil {
		t.buckets = map[string]*rate.Limiter{}
	}
	if b, ok := t.buckets[key]; ok {
		return b
	}
	t.inserts++
	if t.inserts%sweepEvery == 0 {
		for k, b := range t.buckets {
			if b.TokensAt(now) >= float64(b.Burst()) {
				delete(t.buckets, k)
			}
		}
		for k, at := range t.audited {
			if now.Sub(at) >= t.PerAccount.Window {
				delete(t.audited, k)
			}
		}
	}
	b := l.limiter()
	t.buckets[key] = b
	return b
}

// AuditThrottled reports whether a throttled attempt on account (one that
// exists) is to be written to its organization's audit log: the first in
// each PerAccount.Window. The others are in Slipway's log only, so that
// knocking on a locked account as fast as the server answers cannot grow
// the organization's chain faster than PerAccount.Burst refused logins
// plus one throttled login per window.
func (t *LoginThrottle) AuditThrottled(account string) bool {
	now := time.Now()
	if t.Now != nil {
		now = t.Now()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if at, ok := t.audited[account]; ok && now.Sub(at) < t.PerAccount.Window {
		return false
	}
	if t.audited == nil {
		t.audited = map[string]time.Time{}
	}
	t.audited[account] = now
	return true
}

// retryAfter is a Retry-After value in whole seconds, at least 1.
func retryAfter(d time.Duration) int {
	return int(math.Max(1, math.Ceil(d.Seconds())))
}

// clientAddress is the address logins are throttled by: the one the audit
// log records, which believes X-Forwarded-For only from trusted proxies.
func (s *Store) clientAddress(r *http.Request) string {
	var trusted []netip.Prefix
	if s.Audit != nil {
		trusted = s.Audit.Trusted
	}
	ip, _, _ := track.ClientAddress(r, trusted)
	return ip
}

// throttled answers a throttled login with 429 and Retry-After, logs it,
// and records it as a refused login in the claimed account's organization
// when the email has one, once per window (loginRefused).
func (s *Store) throttled(w http.ResponseWriter, r *http.Request, account string, wait time.Duration) error {
	secs := retryAfter(wait)
	ip := s.clientAddress(r)
	httpx.LogFrom(r).Warn().Str("client", ip).Str("email", truncate(account, 254)).Int("retry_after", secs).
		Msg("login throttled")
	err := httpx.Errorf(http.StatusTooManyRequests, "Too many failed logins; try again in %d seconds.", secs)
	s.recordRefusedLogin(r, account, http.StatusTooManyRequests, throttleDetail(secs), true)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	return err
}

func throttleDetail(secs int) string {
	return fmt.Sprintf("login throttled after too many failed attempts; retry after %ds", secs)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
