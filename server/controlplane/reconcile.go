package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"

	"slipway/oteltrace"
	"slipway/runtime"
	"slipway/storage"
)

// maxAttempts bounds how often a revision interrupted by restarts is retried.
const maxAttempts = 3

// Reconciler drives the runtime toward the desired state it reads from the
// store: it builds and deploys queued revisions, restores active ones,
// tears deleted deployments down and watches the agents' health. Handlers
// only record what they want (marking the deployment pending in the same
// transaction) and Kick it. One goroutine scans; each deployment has at
// most one worker at a time.
type Reconciler struct {
	DB        *bolt.DB
	Update    func(func(*bolt.Tx) error) error // durable writes (group commit)
	Driver    runtime.Driver
	Sealer    *storage.Sealer // opens revisions' secrets for the driver
	DataDir   string          // where uploaded archives live
	PublicURL string          // the base of deployments' url (Service.AgentsBase)
	Log       zerolog.Logger
	Now       func() time.Time
	// HealthInterval is how often serving agents are checked (default 5 s).
	HealthInterval time.Duration
	// Metrics counts builds, deploys, jobs and checks; nil: none.
	Metrics *Metrics
	// PostgresURL is SLIPWAY_POSTGRES_URL: each deployment's agent gets a
	// database there (agentdb.go). Empty: agents keep bbolt files.
	PostgresURL string
	// RedisURL is SLIPWAY_REDIS_URL: each scaled deployment's agents get
	// a user and key prefix there (agentredis.go, scale.go).
	RedisURL string
	// Tracing receives the spans of builds and deploys (tracing.go); nil:
	// off. OTELEnv is what every agent gets from the operator's
	// environment (oteltrace.AgentEnv).
	Tracing *oteltrace.Provider
	OTELEnv map[string]string

	logs  *logBook
	ctx   context.Context // jobs end with it
	kickc chan struct{}
	mu    sync.Mutex
	busy  map[string]*job // deployment id → its worker
	wg    sync.WaitGroup
	// watch checks serving agents and recreates lost ones (health.go);
	// nil when the driver cannot tell (the fake driver).
	watch *runtime.Watcher
	// restoring holds deployments whose active revision is restored once
	// at start-up; after that, the watcher decides when to start agents.
	restoring sync.Map
	targets   targetCache
}

type job struct {
	revision string // "" for a deletion
	cancel   context.CancelFunc
}

// Kick tells the reconciler that work was committed; it never blocks.
func (rc *Reconciler) Kick() {
	select {
	case rc.kickc <- struct{}{}:
	default:
	}
}

// Start recovers work interrupted by a restart and begins reconciling until
// ctx ends; Wait blocks until the workers have stopped.
func (rc *Reconciler) Start(ctx context.Context) {
	rc.ctx, rc.kickc, rc.busy = ctx, make(chan struct{}, 1), map[string]*job{}
	rc.wg.Add(1)
	go func() {
		defer rc.wg.Done()
		rc.logs.agent.run(ctx.Done())
	}()
	if err := rc.markInterrupted(); err != nil {
		rc.Log.Error().Err(err).Msg("recover interrupted revisions")
	}
	if err := rc.markActivePending(); err != nil {
		rc.Log.Error().Err(err).Msg("queue active revisions for restore")
	}
	if r, ok := rc.Driver.(runtime.Reconciler); ok {
		if err := rc.reconcileRuntime(ctx, r); err != nil {
			rc.Log.Error().Err(err).Msg("reconcile the runtime with the records")
		}
	}
	rc.startWatcher(ctx)
	if wl, ok := rc.Driver.(runtime.WorkerLister); ok && rc.PostgresURL != "" {
		rc.wg.Add(1)
		go rc.sweepLoop(ctx, wl)
	}
	rc.wg.Add(1)
	go rc.loop(ctx)
}

// Wait blocks until every reconciler goroutine has returned.
func (rc *Reconciler) Wait() { rc.wg.Wait() }

func (rc *Reconciler) update(fn func(*bolt.Tx) error) error { return rc.Update(fn) }

func (rc *Reconciler) now() time.Time {
	if rc.Now != nil {
		return rc.Now().UTC()
	}
	return time.Now().UTC()
}

func (rc *Reconciler) loop(ctx context.Context) {
	defer rc.wg.Done()
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		rc.scan(ctx)
		select {
		case <-ctx.Done():
			return
		case <-rc.kickc:
		case <-t.C:
		}
	}
}

// markInterrupted ends revisions a crash left mid-flight as INTERRUPTED;
// scan then retries the ones that are still their deployment's latest.
func (rc *Reconciler) markInterrupted() error {
	return rc.update(func(tx *bolt.Tx) error {
		var revs []*revisionRecord
		err := eachRevision(tx, func(rev *revisionRecord) error {
			switch {
			case rev.Status == RevisionBuilding, rev.Status == RevisionAwaitingDeploy, rev.Status == RevisionDeploying,
				rev.Status == RevisionAwaitingBuild && rev.Attempt > 0:
				revs = append(revs, rev)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, rev := range revs {
			rev.Status, rev.UpdatedAt, rev.StatusMessage = RevisionInterrupted, rc.now(), "interrupted by a restart of Slipway"
			if err := errors.Join(putRevision(tx, rev), markPending(tx, rev.DeploymentID),
				appendLog(tx, rev.ID, LogEntry{Timestamp: rc.now(), Level: "warning", Phase: "build",
					Message: "this attempt was interrupted by a restart of Slipway; the revision will be retried"})); err != nil {
				return err
			}
		}
		return nil
	})
}

type work struct {
	dep     *deploymentRecord
	rev     *revisionRecord // nil: delete the deployment
	restore bool            // start the active revision again (after a restart of Slipway)
	why     string          // for a restore the health watcher asked for: what happened
}

// workFor says what the reconciler must do for d: delete it, roll out its
// latest revision, or nothing (ok false).
func (rc *Reconciler) workFor(tx *bolt.Tx, d *deploymentRecord) (w work, ok bool, err error) {
	if d.Status == DeploymentAwaitingDelete {
		return work{dep: d}, true, nil
	}
	if d.LatestRevisionID != nil {
		rev, err := getRevision(tx, uuid.MustParse(*d.LatestRevisionID))
		if err != nil {
			return work{}, false, err
		}
		if rev.Status == RevisionQueued || rev.Status == RevisionInterrupted && rev.Attempt < maxAttempts {
			return work{dep: d, rev: rev}, true, nil
		}
	}
	// The active revision is restored here once after a restart of
	// Slipway; from then on the health watcher decides when a lost agent
	// is recreated, backing off, rather than every scan.
	_, startup := rc.restoring.Load(d.ID)
	if d.ActiveRevisionID != nil && (startup || rc.watch == nil) {
		if _, running := rc.Driver.Endpoint(d.ID); running {
			rc.restoring.Delete(d.ID)
		} else {
			rev, err := getRevision(tx, uuid.MustParse(*d.ActiveRevisionID))
			if err != nil {
				return work{}, false, err
			}
			return work{dep: d, rev: rev, restore: true}, true, nil
		}
	}
	return work{}, false, nil
}

// scan reads the pending-work index, starts a worker for each deployment
// that has work and no worker, and drops settled deployments from the index.
// markActivePending queues every deployment with an active revision, so
// the first scan starts agents that did not survive a restart of Slipway
// (child processes) and adopts those that did (containers).
func (rc *Reconciler) markActivePending() error {
	return rc.update(func(tx *bolt.Tx) error {
		var ids []string
		err := eachDeployment(tx, func(d *deploymentRecord) error {
			if d.ActiveRevisionID != nil {
				ids = append(ids, d.ID)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, id := range ids {
			rc.restoring.Store(id, true)
			if err := markPending(tx, id); err != nil {
				return err
			}
		}
		return nil
	})
}

// reconcileRuntime tells the driver which deployments and active revisions
// exist, so it removes what a crash left behind before any new work starts.
func (rc *Reconciler) reconcileRuntime(ctx context.Context, r runtime.Reconciler) error {
	deps := map[string]string{}
	err := rc.DB.View(func(tx *bolt.Tx) error {
		return eachDeployment(tx, func(d *deploymentRecord) error {
			deps[d.ID] = ""
			if d.ActiveRevisionID != nil {
				deps[d.ID] = *d.ActiveRevisionID
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("read deployments: %w", err)
	}
	return r.Reconcile(ctx, deps)
}

// restore starts a deployment's active revision again. Its status stays
// DEPLOYED; a failure marks the deployment UNKNOWN until a retry succeeds.
func (rc *Reconciler) restore(ctx context.Context, dep *deploymentRecord, rev *revisionRecord, why string) {
	log := rc.Log.With().Str("deployment_id", dep.ID).Str("revision_id", rev.ID).Logger()
	logs := rc.logs.newRevisionLog(rev.ID)
	defer logs.Close()
	ctx, span := rc.revisionSpan(ctx, "revision.restore", dep, rev)
	var err error
	defer func() { oteltrace.End(span, err) }()
	setStatus := func(status string) {
		_ = rc.update(func(tx *bolt.Tx) error {
			d, err := readDeployment(tx, uuid.MustParse(dep.ID))
			if err != nil || d.Status == DeploymentAwaitingDelete {
				return nil
			}
			d.Status = status
			return putDeployment(tx, d)
		})
	}
	var spec runtime.Spec
	spec, err = rc.spec(rev)
	if err == nil {
		var artifact string
		if why == "" {
			why = "restarting the active revision after a restart of Slipway"
		}
		logs.Add("info", why)
		if artifact, err = rc.Driver.Build(ctx, spec, logs.Writer("info")); err == nil {
			logs.SetPhase("deploy")
			if err = rc.withAgentState(ctx, &spec, func(m string) { logs.Add("info", m) }); err == nil {
				_, err = rc.Driver.Deploy(ctx, spec, artifact, logs.Writer("info"))
			}
		}
	}
	if err != nil {
		if ctx.Err() == nil {
			log.Error().Err(err).Msg("could not restore the active revision; will retry")
			logs.Add("error", "restore failed: "+err.Error())
			setStatus(DeploymentUnknown)
		}
		return
	}
	setStatus(DeploymentReady)
	log.Info().Msg("active revision restored")
}

func (rc *Reconciler) scan(ctx context.Context) {
	var todo []work
	var settled []uuid.UUID
	err := rc.DB.View(func(tx *bolt.Tx) error {
		ids, err := pendingDeployments(tx)
		if err != nil {
			return err
		}
		for _, id := range ids {
			d, err := readDeployment(tx, id)
			if err != nil {
				settled = append(settled, id) // deleted
				continue
			}
			w, ok, err := rc.workFor(tx, d)
			if err != nil {
				return err
			}
			if ok {
				todo = append(todo, w)
			}
			// settle re-checks inside its write; here we only pick candidates.
			if !ok || d.Status == DeploymentAwaitingDatabase {
				settled = append(settled, id)
			}
		}
		return nil
	})
	if err != nil {
		rc.Log.Error().Err(err).Msg("reconcile scan")
		return
	}
	rc.mu.Lock()
	var idle []uuid.UUID
	for _, id := range settled {
		if rc.busy[id.String()] == nil {
			idle = append(idle, id)
		}
	}
	rc.mu.Unlock()
	if len(idle) > 0 {
		rc.settle(idle)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, w := range todo {
		cur := rc.busy[w.dep.ID]
		if cur != nil {
			// A newer revision or a deletion supersedes the running job. A
			// restore never does: while a rollout runs, the deployment may
			// have no endpoint (its old agent is stopped for the handover),
			// which is not a reason to bring the old revision back.
			if w.rev == nil && cur.revision != "" || w.rev != nil && !w.restore && cur.revision != w.rev.ID {
				cur.cancel()
			}
			continue
		}
		rc.launch(w)
	}
}

// launch starts a worker for w; rc.mu is held and the deployment has none.
func (rc *Reconciler) launch(w work) {
	jctx, cancel := context.WithCancel(rc.ctx)
	j := &job{cancel: cancel}
	if w.rev != nil {
		j.revision = w.rev.ID
	}
	rc.busy[w.dep.ID] = j
	rc.restoring.Delete(w.dep.ID) // done here, or superseded
	rc.wg.Add(1)
	go func(w work) {
		defer rc.wg.Done()
		defer cancel()
		switch {
		case w.rev == nil:
			rc.Metrics.job("remove")
			rc.removeDeployment(jctx, w.dep)
		case w.restore:
			rc.Metrics.job("restore")
			rc.restore(jctx, w.dep, w.rev, w.why)
		default:
			rc.Metrics.job("rollout")
			rc.rollOut(jctx, w.dep, w.rev)
		}
		rc.mu.Lock()
		delete(rc.busy, w.dep.ID)
		rc.mu.Unlock()
		rc.Kick()
		if rc.watch != nil {
			rc.watch.Poke(w.dep.ID) // see how the agent is now
		}
	}(w)
}

// settle moves new deployments out of AWAITING_DATABASE (the agent's
// database lives with each revision, so once the record exists there is
// nothing more to wait for) and drops deployments with no work left from the
// pending index. Each check is repeated inside the write, so a PATCH that
// queued work meanwhile keeps its deployment pending.
func (rc *Reconciler) settle(ids []uuid.UUID) {
	err := rc.update(func(tx *bolt.Tx) error {
		for _, id := range ids {
			d, err := readDeployment(tx, id)
			if err != nil {
				if err := unmarkPending(tx, id); err != nil {
					return err
				}
				continue
			}
			if d.Status == DeploymentAwaitingDatabase {
				d.Status = DeploymentUnused
				if d.ActiveRevisionID != nil {
					d.Status = DeploymentReady
				}
				if err := putDeployment(tx, d); err != nil {
					return err
				}
			}
			if _, ok, err := rc.workFor(tx, d); err != nil {
				return err
			} else if !ok {
				if err := unmarkPending(tx, id); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		rc.Log.Error().Err(err).Msg("settle deployments")
	}
}

var errStale = errors.New("revision changed under the reconciler")

// transition moves a revision from one status to another, only if it is
// still in the expected status: a PATCH may have skipped it meanwhile.
func (rc *Reconciler) transition(revID string, from []string, to, msg string) error {
	if RevisionTerminal(to) {
		// An agent that failed its deploy wrote its last words just now:
		// they are stored before the status says the revision is over.
		rc.logs.agent.Flush()
	}
	return rc.update(func(tx *bolt.Tx) error {
		rev, err := getRevision(tx, uuid.MustParse(revID))
		if err != nil {
			return err
		}
		ok := false
		for _, f := range from {
			ok = ok || rev.Status == f
		}
		if !ok {
			return errStale
		}
		if to == RevisionAwaitingBuild {
			rev.Attempt++
		}
		rev.Status, rev.UpdatedAt, rev.StatusMessage = to, rc.now(), msg
		return putRevision(tx, rev)
	})
}

// spec builds the driver's view of a revision, with secrets decrypted and
// the operator's OTEL_* variables the secrets leave unset (tracing.go).
func (rc *Reconciler) spec(rev *revisionRecord) (runtime.Spec, error) {
	env, err := openSecrets(rc.Sealer, rev.DeploymentID, rev.Secrets)
	if err != nil {
		return runtime.Spec{}, err
	}
	sp := runtime.Spec{DeploymentID: rev.DeploymentID, DeploymentName: rev.DeploymentName, RevisionID: rev.ID,
		WorkspaceID: rev.WorkspaceID, Source: rev.Source, Env: env}
	src := rev.SourceRevisionConfig
	if src.ImageURI != nil {
		sp.ImageURI = *src.ImageURI
	}
	if src.SourceTarballPath != nil {
		sp.TarballPath = uploadPath(rc.DataDir, *src.SourceTarballPath)
	}
	if src.GraphConfigPath != nil {
		sp.GraphConfig = *src.GraphConfigPath
	}
	if c := rev.SourceConfig.InstallCommand; c != nil {
		sp.InstallCommand = *c
	}
	if c := rev.SourceConfig.BuildCommand; c != nil {
		sp.BuildCommand = *c
	}
	sp.ResourceSpec = rev.SourceConfig.ResourceSpec
	if len(rev.SecretReferences) > 0 {
		sp.SecretReferences = rev.SecretReferences
	}
	return rc.withAgentEnv(sp), nil
}

// removeDeployment tears a deployment down in the runtime, then deletes its
// records, logs, uploads and (if asked) its tracing project in one transaction.
func (rc *Reconciler) removeDeployment(ctx context.Context, dep *deploymentRecord) {
	log := rc.Log.With().Str("deployment_id", dep.ID).Logger()
	if err := rc.Driver.Remove(ctx, dep.ID); err != nil {
		log.Warn().Err(err).Msg("runtime could not remove the deployment yet; will retry")
		return
	}
	// The agent has stopped: its database can go, before the record that
	// names it (a failure keeps the record, and the deletion is retried).
	if err := rc.removeAgentDB(ctx, dep); err != nil {
		log.Warn().Err(err).Msg("could not drop the deployment's PostgreSQL database yet; will retry")
		return
	}
	if err := rc.removeAgentRedis(ctx, dep.ID); err != nil {
		log.Warn().Err(err).Msg("could not delete the deployment's Redis user and keys yet; will retry")
		return
	}
	err := rc.update(func(tx *bolt.Tx) error {
		d, err := readDeployment(tx, uuid.MustParse(dep.ID))
		if err != nil {
			return nil // already gone
		}
		return removeDeploymentRecords(tx, d)
	})
	if err != nil {
		log.Error().Err(err).Msg("delete deployment records")
		return
	}
	// Files go after the records: a crash in between leaves only garbage
	// files, never a record pointing at a missing archive.
	if err := os.RemoveAll(filepath.Join(rc.DataDir, "uploads", dep.ID)); err != nil {
		log.Warn().Err(err).Msg("remove uploaded archives")
	}
	log.Info().Msg("deployment deleted")
}
