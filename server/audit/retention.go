package audit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"
)

// DefaultRetention is how long events are kept when an organization sets
// nothing shorter: the spec's maximum, 400 days.
const DefaultRetention = 400 * 24 * time.Hour

// Retention is the job that deletes each organization's events older than
// its retention, hourly and once at start-up, leaving a signed anchor so the
// rest of each chain still verifies.
type Retention struct {
	Log *Log
	DB  *bolt.DB
	// Update runs a durable write transaction: the same group-committing
	// writer the API uses, so pruning is serialized with audited writes.
	Update func(func(*bolt.Tx) error) error
	// For returns an organization's retention, read in the pruning
	// transaction. Nil, or a non-positive answer, means DefaultRetention;
	// answers above it are capped to it.
	For      func(tx *bolt.Tx, org uuid.UUID) time.Duration
	Interval time.Duration // default 1h
	Logger   zerolog.Logger
	Now      func() time.Time

	wg sync.WaitGroup
}

func (r *Retention) now() time.Time {
	if r.Now != nil {
		return r.Now().UTC()
	}
	return time.Now().UTC()
}

func (r *Retention) retention(tx *bolt.Tx, org uuid.UUID) time.Duration {
	if r.For == nil {
		return DefaultRetention
	}
	d := r.For(tx, org)
	if d <= 0 || d > DefaultRetention {
		return DefaultRetention
	}
	return d
}

// Start runs the job now and then every Interval until ctx ends.
func (r *Retention) Start(ctx context.Context) {
	every := r.Interval
	if every <= 0 {
		every = time.Hour
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			r.runLogged()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// Wait returns once the job started by Start has stopped.
func (r *Retention) Wait() { r.wg.Wait() }

func (r *Retention) runLogged() {
	pruned, err := r.RunOnce()
	total := 0
	for _, n := range pruned {
		total += n
	}
	if err != nil {
		r.Logger.Error().Err(err).Int("pruned", total).Msg("audit retention")
		return
	}
	if total > 0 {
		r.Logger.Info().Int("pruned", total).Int("organizations", len(pruned)).Msg("audit retention pruned old events")
	}
}

// RunOnce prunes every organization to its own retention, one write
// transaction per organization. It returns the number of events pruned
// per organization (only those with any) and the errors met; an error in
// one organization does not stop the others.
func (r *Retention) RunOnce() (map[uuid.UUID]int, error) {
	return r.prune(nil, func(tx *bolt.Tx, org uuid.UUID) time.Time {
		return r.now().Add(-r.retention(tx, org))
	}, nil)
}

// PruneBefore prunes the events older than cutoff, of the given
// organizations or, when none are given, of every organization (the host
// administrator's `slipway admin audit prune`). record, unless nil, is
// called in each transaction that pruned n > 0 events of org, so that the
// event saying so commits with the pruning.
func (r *Retention) PruneBefore(cutoff time.Time, record func(tx *bolt.Tx, org uuid.UUID, n int) error, orgs ...uuid.UUID) (map[uuid.UUID]int, error) {
	return r.prune(orgs, func(*bolt.Tx, uuid.UUID) time.Time { return cutoff }, record)
}

func (r *Retention) prune(orgs []uuid.UUID, cutoff func(*bolt.Tx, uuid.UUID) time.Time,
	record func(tx *bolt.Tx, org uuid.UUID, n int) error) (map[uuid.UUID]int, error) {
	if orgs == nil {
		var err error
		if orgs, err = chainOrgs(r.DB); err != nil {
			return nil, err
		}
	}
	out := map[uuid.UUID]int{}
	var errs []error
	for _, org := range orgs {
		n := 0
		err := r.Update(func(tx *bolt.Tx) error {
			var err error
			n, err = r.Log.Prune(tx, org, cutoff(tx, org))
			if err != nil || n == 0 || record == nil {
				return err
			}
			return record(tx, org, n)
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("organization %s: %w", org, err))
			continue
		}
		if n > 0 {
			out[org] = n
		}
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("audit prune: %v", errs)
	}
	return out, nil
}

// chainOrgs lists the organizations that have audit events.
func chainOrgs(db *bolt.DB) ([]uuid.UUID, error) {
	var orgs []uuid.UUID
	err := db.View(func(tx *bolt.Tx) error {
		orgs = Orgs(tx)
		return nil
	})
	return orgs, err
}
