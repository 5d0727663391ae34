package controlplane

import (
	"net/http"
	"strconv"
	"sync"

	"slipway/server/auth"
	"slipway/server/httpx"
)

// Defaults of the log follower caps (SLIPWAY_LOG_FOLLOWERS_PER_CREDENTIAL,
// SLIPWAY_LOG_FOLLOWERS_MAX). Each follower holds a connection, two
// goroutines and its buffers for as long as it lasts, so their number is
// what bounds the memory they take: 16 covers a person with a dashboard
// tab per deployment and a few `slipway logs -f`; 256 in all is a few MiB
// of connection buffers.
const (
	DefaultFollowersPerCredential = 16
	DefaultFollowersMax           = 256
)

// followerRetryAfter is the Retry-After of a refused follow, in seconds: a
// slot frees when another follower ends, which nothing predicts, so this
// only spaces the retries out.
const followerRetryAfter = 5

// followerSlots counts the log streams being followed, per credential and
// in all, and refuses one beyond either cap.
type followerSlots struct {
	perCredential, max int

	mu    sync.Mutex
	total int
	held  map[string]int // credential → streams it follows
}

// followerKey names the credential a stream counts against: the API key
// or token by its id. A login session has no id of its own, so a user's
// sessions share one budget (logging in again does not buy more streams).
func followerKey(p *auth.Principal) string {
	if p.CredentialID != nil {
		return "credential:" + p.CredentialID.String()
	}
	return "user:" + p.UserID.String()
}

// acquire takes a slot for key, or answers why not (429); release gives it
// back and may be called once.
func (f *followerSlots) acquire(key string) (release func(), err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.held[key] >= f.perCredential:
		return nil, httpx.Errorf(http.StatusTooManyRequests,
			"This credential already follows %d log streams, the most allowed at once: close one, or try again in %d seconds.",
			f.perCredential, followerRetryAfter)
	case f.total >= f.max:
		return nil, httpx.Errorf(http.StatusTooManyRequests,
			"The server already follows %d log streams, the most it allows at once: try again in %d seconds.",
			f.max, followerRetryAfter)
	}
	if f.held == nil {
		f.held = map[string]int{}
	}
	f.held[key]++
	f.total++
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.total--
			if f.held[key]--; f.held[key] <= 0 {
				delete(f.held, key)
			}
		})
	}, nil
}

// inUse reports the streams followed in all and by key (for tests).
func (f *followerSlots) inUse(key string) (total, byKey int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total, f.held[key]
}

// followers is the service's follower count, with the configured caps.
func (s *Service) followers() *followerSlots {
	s.slotsOnce.Do(func() {
		s.slots = &followerSlots{perCredential: s.FollowersPerCredential, max: s.FollowersMax}
		if s.slots.perCredential <= 0 {
			s.slots.perCredential = DefaultFollowersPerCredential
		}
		if s.slots.max <= 0 {
			s.slots.max = DefaultFollowersMax
		}
	})
	return s.slots
}

// followSlot takes the caller's follower slot or writes the Retry-After of
// the 429 it returns.
func (s *Service) followSlot(w http.ResponseWriter, r *http.Request) (release func(), err error) {
	release, err = s.followers().acquire(followerKey(auth.From(r)))
	if err != nil {
		w.Header().Set("Retry-After", strconv.Itoa(followerRetryAfter))
	}
	return release, err
}
