package controlplane

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/runtime"
)

// The health watcher's timing. A lost agent gets healthGrace to come back
// by itself (a container's restart policy, the process supervisor) before
// it is recreated; recreations back off from healthMinBackoff to
// healthMaxBackoff, forgiven after healthResetAfter of good health.
const (
	healthRetry      = time.Second
	healthGrace      = 3 * time.Second
	healthMinBackoff = 5 * time.Second
	healthMaxBackoff = 5 * time.Minute
	healthResetAfter = 10 * time.Minute
)

// startWatcher starts the health watcher when the driver can check its
// agents. It runs with the reconciler and stops with it.
func (rc *Reconciler) startWatcher(ctx context.Context) {
	hc, ok := rc.Driver.(runtime.HealthChecker)
	if !ok {
		return
	}
	interval := rc.HealthInterval
	if interval <= 0 {
		interval = 5 * time.Second
	}
	w := &runtime.Watcher{Interval: interval, Retry: min(healthRetry, interval), Grace: healthGrace,
		MinBackoff: healthMinBackoff, MaxBackoff: healthMaxBackoff, ResetAfter: healthResetAfter,
		Targets: rc.healthTargets, Check: rc.Metrics.checked(hc.CheckHealth), Recover: rc.recoverAgent, Changed: rc.healthChanged}
	rc.watch = w
	if n, ok := rc.Driver.(runtime.HealthNotifier); ok {
		n.WatchHealth(ctx, w.Poke)
	}
	rc.wg.Add(1)
	go func() {
		defer rc.wg.Done()
		w.Run(ctx)
	}()
}

// deploymentGens counts committed deployment writes, per database (one
// per control plane; tests run several in one process); a target cache is
// rebuilt when its database's count moved. Counting on commit (not on
// write) keeps a reader from caching what a rolled-back write would change.
var deploymentGens sync.Map // *bolt.DB → *atomic.Uint64

// deploymentsGen is db's count of committed deployment writes.
func deploymentsGen(db *bolt.DB) *atomic.Uint64 {
	if v, ok := deploymentGens.Load(db); ok {
		return v.(*atomic.Uint64)
	}
	v, _ := deploymentGens.LoadOrStore(db, new(atomic.Uint64))
	return v.(*atomic.Uint64)
}

// deploymentsChanged is called by every transaction that writes or deletes
// a deployment record.
func deploymentsChanged(tx *bolt.Tx) {
	gen := deploymentsGen(tx.DB())
	tx.OnCommit(func() { gen.Add(1) })
}

// targetCache keeps the deployments with an active revision between
// changes of any deployment record (deploymentsGen counts them), so the
// watcher's rounds do not read the database each second.
type targetCache struct {
	mu     sync.Mutex
	gen    uint64
	ok     bool
	active map[string]string // deployment → active revision
}

func (rc *Reconciler) healthTargets() []runtime.Target {
	c := &rc.targets
	c.mu.Lock()
	gen := deploymentsGen(rc.DB).Load()
	if !c.ok || c.gen != gen {
		active := map[string]string{}
		err := rc.DB.View(func(tx *bolt.Tx) error {
			return eachDeployment(tx, func(d *deploymentRecord) error {
				if d.ActiveRevisionID != nil && d.Status != DeploymentAwaitingDelete {
					active[d.ID] = *d.ActiveRevisionID
				}
				return nil
			})
		})
		if err != nil {
			c.mu.Unlock()
			rc.Log.Error().Err(err).Msg("health watcher: read deployments")
			return nil
		}
		c.active, c.gen, c.ok = active, gen, true
	}
	out := make([]runtime.Target, 0, len(c.active))
	for dep, rev := range c.active {
		out = append(out, runtime.Target{Deployment: dep, Revision: rev})
	}
	c.mu.Unlock()
	rc.mu.Lock()
	for i := range out {
		_, restoring := rc.restoring.Load(out[i].Deployment)
		out[i].Busy = restoring || rc.busy[out[i].Deployment] != nil
	}
	rc.mu.Unlock()
	return out
}

// recoverAgent starts recreating a lost agent from the active revision
// (same image or build, same volume or agent database, same secrets) as a
// reconciler job, unless other work holds the deployment.
func (rc *Reconciler) recoverAgent(dep, rev string, attempt int, reason string) bool {
	var w work
	err := rc.DB.View(func(tx *bolt.Tx) error {
		d, err := readDeployment(tx, uuid.MustParse(dep))
		if err != nil {
			return err
		}
		if d.ActiveRevisionID == nil || *d.ActiveRevisionID != rev || d.Status == DeploymentAwaitingDelete {
			return errStale
		}
		r, err := getRevision(tx, uuid.MustParse(rev))
		if err != nil {
			return err
		}
		w = work{dep: d, rev: r, restore: true,
			why: fmt.Sprintf("recreating the agent of the active revision (attempt %d): %s", attempt, reason)}
		return nil
	})
	if err != nil {
		if !errors.Is(err, errStale) {
			rc.Log.Error().Err(err).Str("deployment_id", dep).Msg("health watcher: read the active revision")
		}
		return false
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.busy[dep] != nil {
		return false
	}
	rc.Log.Warn().Str("deployment_id", dep).Str("revision_id", rev).Int("attempt", attempt).Str("reason", reason).
		Msg("recreating a lost agent")
	rc.launch(w)
	return true
}

// healthChanged records a change of the active revision's health: the
// health field, the status (UNKNOWN while the agent cannot be reached,
// READY again once it answers) and a line in the revision's deploy log,
// in one transaction.
func (rc *Reconciler) healthChanged(dep, rev string, h runtime.Health) {
	err := rc.update(func(tx *bolt.Tx) error {
		d, err := readDeployment(tx, uuid.MustParse(dep))
		if err != nil {
			return nil
		}
		if d.ActiveRevisionID == nil || *d.ActiveRevisionID != rev || d.Status == DeploymentAwaitingDelete {
			return nil
		}
		prev := d.Health
		if prev != nil && prev.Status == h.Status {
			return nil // e.g. healthy, as recorded before a restart of Slipway
		}
		d.Health = &h
		var msg, level string
		switch {
		case h.Status == runtime.HealthUnhealthy:
			if d.Status == DeploymentReady {
				d.Status = DeploymentUnknown
			}
			level, msg = "warning", "health check failed: "+h.Reason+"; the deployment is UNKNOWN until its agent answers again"
		case prev != nil:
			if d.Status == DeploymentUnknown {
				d.Status = DeploymentReady
			}
			level, msg = "info", fmt.Sprintf("the agent answers again after %s down", h.Since.Sub(prev.Since).Round(100*time.Millisecond))
		}
		if err := putDeployment(tx, d); err != nil {
			return err
		}
		if msg == "" {
			return nil
		}
		return appendLog(tx, rev, LogEntry{Timestamp: h.Since.UTC(), Level: level, Phase: "deploy", Message: msg})
	})
	if err != nil {
		rc.Log.Error().Err(err).Str("deployment_id", dep).Msg("record agent health")
		return
	}
	ev := rc.Log.Info()
	if h.Status == runtime.HealthUnhealthy {
		ev = rc.Log.Warn().Str("reason", h.Reason)
	}
	ev.Str("deployment_id", dep).Str("revision_id", rev).Str("health", h.Status).Msg("agent health changed")
}
