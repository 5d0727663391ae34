package agent

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// Thread time-to-live, as the hosted LangGraph server offers it
// (langgraph.json "checkpointer": {"ttl": ...}, and a ttl per thread).
//
// A thread with a TTL expires when it has been left alone for that long:
// its expiry is its updated_at (a run, a state update, a patch) plus its
// TTL. The sweeper then deletes it ("delete") or drops every checkpoint
// but the latest of each namespace ("keep_latest"). A busy thread is never
// swept.
//
// The sweeper does not read every thread: the TTL index (store_ttl.go)
// holds the threads that have a TTL by the expiry they had when the entry
// was written, and the thread record remembers that entry
// (ttlPolicy.Indexed). Runs on
// a thread move its updated_at but not its entry (no index write on the
// run path): the sweeper re-keys an entry it finds due whose thread was
// updated since, and sweeps only those still expired.

// TTL strategies.
const (
	TTLDelete     = "delete"
	TTLKeepLatest = "keep_latest"
)

// TTLConfig is langgraph.json's checkpointer.ttl.
type TTLConfig struct {
	// Strategy is what the default TTL does ("delete" when empty).
	Strategy string
	// DefaultTTL is the TTL in minutes of threads created without one; 0
	// is none.
	DefaultTTL float64
	// SweepInterval is how often the sweeper runs (5 minutes when 0).
	SweepInterval time.Duration
	// SweepLimit is the most expired threads one sweep handles (10000
	// when 0); the rest wait for the next sweep.
	SweepLimit int
}

// ThreadTTL is a thread's TTL as requests give it: {"ttl": minutes,
// "strategy": "delete"|"keep_latest"}.
type ThreadTTL struct {
	Strategy string  `json:"strategy"`
	Minutes  float64 `json:"ttl"`
}

// ThreadTTLInfo is a thread's TTL as GET /threads/{id}?include=ttl shows it.
type ThreadTTLInfo struct {
	Strategy   string    `json:"strategy"`
	TTLMinutes float64   `json:"ttl_minutes"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// ttlPolicy is a thread's TTL as its record stores it.
type ttlPolicy struct {
	Strategy string  `json:"strategy"`
	Minutes  float64 `json:"minutes"`
	// Indexed is the expiry of the thread's TTL index entry.
	Indexed time.Time `json:"indexed"`
	// Pruned is the updated_at of the thread when keep_latest last
	// pruned it: a thread not updated since has nothing more to prune.
	Pruned time.Time `json:"pruned,omitzero"`
}

// ValidTTL checks a TTL's minutes and strategy; the API words its own
// errors, this is the engine's guard.
func ValidTTL(t ThreadTTL) error {
	if t.Strategy != TTLDelete && t.Strategy != TTLKeepLatest {
		return fmt.Errorf("%w: ttl strategy must be %q or %q, not %q", ErrInvalid, TTLDelete, TTLKeepLatest, t.Strategy)
	}
	if !(t.Minutes > 0) || math.IsInf(t.Minutes, 0) || t.Minutes > maxTTLMinutes {
		return fmt.Errorf("%w: ttl must be a number of minutes above 0 and at most %d", ErrInvalid, maxTTLMinutes)
	}
	return nil
}

// maxTTLMinutes keeps an expiry inside time.Duration's range (about 290
// years): 100 years.
const maxTTLMinutes = 100 * 366 * 24 * 60

func ttlDuration(minutes float64) time.Duration {
	return time.Duration(minutes * float64(time.Minute))
}

// setTTL gives t (stored by the caller) the TTL p, expiring ttl minutes
// after its updated_at, and moves its index entry there.
func setTTL(tx Tx, t *threadRecord, p ThreadTTL) error {
	if t.TTL != nil {
		if err := tx.DeleteTTLEntry(ttlEntryOf(t.TTL.Indexed, t.ThreadID)); err != nil {
			return err
		}
	}
	expiry := t.UpdatedAt.Add(ttlDuration(p.Minutes))
	t.TTL = &ttlPolicy{Strategy: p.Strategy, Minutes: p.Minutes, Indexed: expiry}
	return tx.PutTTLEntry(ttlEntryOf(expiry, t.ThreadID))
}

// initialTTL gives a thread being created its TTL: ttl, or the
// configured default when ttl is nil.
func (e *Engine) initialTTL(tx Tx, t *threadRecord, ttl *ThreadTTL) error {
	if ttl != nil {
		return setTTL(tx, t, *ttl)
	}
	return e.defaultTTL(tx, t)
}

// defaultTTL gives a thread being created the configured default TTL, if
// there is one.
func (e *Engine) defaultTTL(tx Tx, t *threadRecord) error {
	if e.TTL.DefaultTTL <= 0 || t.TTL != nil {
		return nil
	}
	return setTTL(tx, t, ThreadTTL{Strategy: cmp.Or(e.TTL.Strategy, TTLDelete), Minutes: e.TTL.DefaultTTL})
}

// SetThreadTTL sets a thread's TTL (ttl nil: the configured default, and
// only when the thread has no TTL yet). Its expiry counts from the
// thread's updated_at.
func (e *Engine) SetThreadTTL(id string, ttl *ThreadTTL) error {
	if ttl == nil && e.TTL.DefaultTTL <= 0 {
		return nil
	}
	if ttl != nil {
		if err := ValidTTL(*ttl); err != nil {
			return err
		}
	}
	return e.store.Update(context.Background(), func(tx Tx) error {
		t, err := tx.GetThread(id)
		if err != nil {
			return fmt.Errorf("%w: thread %s", ErrNotFound, id)
		}
		if ttl == nil {
			if t.TTL != nil {
				return nil
			}
			if err := e.defaultTTL(tx, t); err != nil {
				return err
			}
		} else if err := setTTL(tx, t, *ttl); err != nil {
			return err
		}
		return tx.PutThread(t)
	})
}

// PatchThreadTTL is PatchThread that also sets the thread's TTL, counted
// from now (the patch is the thread's latest update).
func (e *Engine) PatchThreadTTL(id string, metadata map[string]any, ttl ThreadTTL) (Thread, error) {
	if err := ValidTTL(ttl); err != nil {
		return Thread{}, err
	}
	return e.patchThread(id, metadata, &ttl)
}

// GetThreadTTL returns a thread and its TTL (nil when it has none).
func (e *Engine) GetThreadTTL(id string) (Thread, *ThreadTTLInfo, error) {
	var out Thread
	var info *ThreadTTLInfo
	err := e.store.ViewThread(context.Background(), id, func(tx ReadTx) error {
		t, err := tx.GetThread(id)
		if err != nil {
			return fmt.Errorf("%w: thread %s", ErrNotFound, id)
		}
		out = t.view()
		if t.TTL != nil {
			info = &ThreadTTLInfo{Strategy: t.TTL.Strategy, TTLMinutes: t.TTL.Minutes,
				ExpiresAt: t.UpdatedAt.Add(ttlDuration(t.TTL.Minutes))}
		}
		return nil
	})
	return out, info, err
}

// ParseTTLConfig reads langgraph.json's checkpointer object (raw may be
// empty); errors name the field.
func ParseTTLConfig(raw json.RawMessage) (TTLConfig, error) {
	var cfg TTLConfig
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return cfg, nil
	}
	var cp struct {
		TTL json.RawMessage `json:"ttl"`
	}
	if err := json.Unmarshal(raw, &cp); err != nil {
		return cfg, fmt.Errorf("checkpointer must be an object")
	}
	if len(cp.TTL) == 0 || string(cp.TTL) == "null" {
		return cfg, nil
	}
	var t map[string]json.RawMessage
	if err := json.Unmarshal(cp.TTL, &t); err != nil {
		return cfg, fmt.Errorf("checkpointer.ttl must be an object")
	}
	for k := range t {
		switch k {
		case "strategy", "default_ttl", "sweep_interval_minutes", "sweep_limit":
		default:
			return cfg, fmt.Errorf("checkpointer.ttl.%s is not a setting (strategy, default_ttl, sweep_interval_minutes, sweep_limit)", k)
		}
	}
	isNull := func(k string) bool { v, ok := t[k]; return !ok || string(v) == "null" }
	if !isNull("strategy") {
		if err := json.Unmarshal(t["strategy"], &cfg.Strategy); err != nil || cfg.Strategy != TTLDelete && cfg.Strategy != TTLKeepLatest {
			return cfg, fmt.Errorf("checkpointer.ttl.strategy must be %q or %q", TTLDelete, TTLKeepLatest)
		}
	}
	if !isNull("default_ttl") {
		if err := json.Unmarshal(t["default_ttl"], &cfg.DefaultTTL); err != nil || ValidTTL(ThreadTTL{Strategy: TTLDelete, Minutes: cfg.DefaultTTL}) != nil {
			return cfg, fmt.Errorf("checkpointer.ttl.default_ttl must be a number of minutes above 0 and at most %d", maxTTLMinutes)
		}
	}
	if !isNull("sweep_interval_minutes") {
		var m int
		if err := json.Unmarshal(t["sweep_interval_minutes"], &m); err != nil || m < 1 || m > 7*24*60 {
			return cfg, fmt.Errorf("checkpointer.ttl.sweep_interval_minutes must be a whole number of minutes from 1 to %d", 7*24*60)
		}
		cfg.SweepInterval = time.Duration(m) * time.Minute
	}
	if !isNull("sweep_limit") {
		if err := json.Unmarshal(t["sweep_limit"], &cfg.SweepLimit); err != nil || cfg.SweepLimit < 1 {
			return cfg, fmt.Errorf("checkpointer.ttl.sweep_limit must be a whole number above 0")
		}
	}
	return cfg, nil
}
