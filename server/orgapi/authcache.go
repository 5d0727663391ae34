package orgapi

import (
	"crypto/sha256"
	"sync"
	"sync/atomic"
	"time"

	"slipway/server/auth"
)

// authCache remembers resolved principals so a request does not re-read
// its key, user and workspace from the database. Every identity write bumps
// the generation (after it commits), which invalidates every entry; an
// entry records the generation read *before* its lookup, so one resolved
// during a write can never outlive it.
type authCache struct {
	gen atomic.Uint64
	mu  sync.RWMutex
	m   map[cacheKey]cacheEntry
}

type cacheKey struct {
	hash        [32]byte
	tenant, org string
}

type cacheEntry struct {
	p       auth.Principal
	gen     uint64
	expires *time.Time
}

const maxCached = 10000

func (c *authCache) get(k cacheKey, now time.Time) (*auth.Principal, bool) {
	c.mu.RLock()
	e, ok := c.m[k]
	c.mu.RUnlock()
	if !ok || e.gen != c.gen.Load() || e.expires != nil && !now.Before(*e.expires) {
		return nil, false
	}
	p := e.p // a copy: handlers get their own
	return &p, true
}

func (c *authCache) put(k cacheKey, p *auth.Principal, gen uint64, expires *time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCached {
		c.m = map[cacheKey]cacheEntry{}
	}
	c.m[k] = cacheEntry{p: *p, gen: gen, expires: expires}
}

func (c *authCache) invalidate() { c.gen.Add(1) }

func keyOf(key, tenant, org string) cacheKey {
	return cacheKey{hash: sha256.Sum256([]byte(key)), tenant: tenant, org: org}
}
