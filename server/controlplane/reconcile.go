package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/runtime"
)

// maxAttempts bounds how often a revision interrupted by restarts is retried.
const maxAttempts = 3

// reconciler drives the runtime toward the stored desired state. One
// goroutine scans; each deployment has at most one worker at a time.
type reconciler struct {
	s     *Service
	ctx   context.Context // jobs end with it
	kickc chan struct{}
	mu    sync.Mutex
	busy  map[string]*job // deployment id → its worker
	wg    sync.WaitGroup
}

type job struct {
	revision string // "" for a deletion
	cancel   context.CancelFunc
}

func (s *Service) kick() {
	if s.rec == nil {
		return
	}
	select {
	case s.rec.kickc <- struct{}{}:
	default:
	}
}

// Start recovers work interrupted by a restart and begins reconciling until
// ctx ends; Wait blocks until the workers have stopped.
func (s *Service) Start(ctx context.Context) {
	s.rec = &reconciler{s: s, ctx: ctx, kickc: make(chan struct{}, 1), busy: map[string]*job{}}
	s.startAgentLogs(ctx)
	if err := s.markInterrupted(); err != nil {
		s.Log.Error().Err(err).Msg("recover interrupted revisions")
	}
	if err := s.markActivePending(); err != nil {
		s.Log.Error().Err(err).Msg("queue active revisions for restore")
	}
	if r, ok := s.Driver.(runtime.Reconciler); ok {
		if err := s.reconcileRuntime(ctx, r); err != nil {
			s.Log.Error().Err(err).Msg("reconcile the runtime with the records")
		}
	}
	s.startWatcher(ctx)
	s.rec.wg.Add(1)
	go s.rec.loop(ctx)
}

// Wait blocks until every reconciler goroutine has returned.
func (s *Service) Wait() {
	if s.rec != nil {
		s.rec.wg.Wait()
	}
}

func (rc *reconciler) loop(ctx context.Context) {
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
func (s *Service) markInterrupted() error {
	return s.update(func(tx *bolt.Tx) error {
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
			rev.Status, rev.UpdatedAt, rev.StatusMessage = RevisionInterrupted, s.now(), "interrupted by a restart of Slipway"
			if err := errors.Join(putRevision(tx, rev), markPending(tx, rev.DeploymentID),
				appendLog(tx, rev.ID, LogEntry{Timestamp: s.now(), Level: "warning", Phase: "build",
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
func (s *Service) workFor(tx *bolt.Tx, d *deploymentRecord) (w work, ok bool, err error) {
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
	_, startup := s.restoring.Load(d.ID)
	if d.ActiveRevisionID != nil && (startup || s.watch == nil) {
		if _, running := s.Driver.Endpoint(d.ID); running {
			s.restoring.Delete(d.ID)
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
func (s *Service) markActivePending() error {
	return s.update(func(tx *bolt.Tx) error {
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
			s.restoring.Store(id, true)
			if err := markPending(tx, id); err != nil {
				return err
			}
		}
		return nil
	})
}

// reconcileRuntime tells the driver which deployments and active revisions
// exist, so it removes what a crash left behind before any new work starts.
func (s *Service) reconcileRuntime(ctx context.Context, r runtime.Reconciler) error {
	deps := map[string]string{}
	err := s.DB.View(func(tx *bolt.Tx) error {
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
func (s *Service) restore(ctx context.Context, dep *deploymentRecord, rev *revisionRecord, why string) {
	log := s.Log.With().Str("deployment_id", dep.ID).Str("revision_id", rev.ID).Logger()
	logs := s.newRevisionLog(rev.ID)
	defer logs.Close()
	setStatus := func(status string) {
		_ = s.update(func(tx *bolt.Tx) error {
			d, err := readDeployment(tx, uuid.MustParse(dep.ID))
			if err != nil || d.Status == DeploymentAwaitingDelete {
				return nil
			}
			d.Status = status
			return putDeployment(tx, d)
		})
	}
	spec, err := s.spec(rev)
	if err == nil {
		var artifact string
		if why == "" {
			why = "restarting the active revision after a restart of Slipway"
		}
		logs.Add("info", why)
		if artifact, err = s.Driver.Build(ctx, spec, logs.Writer("info")); err == nil {
			logs.SetPhase("deploy")
			_, err = s.Driver.Deploy(ctx, spec, artifact, logs.Writer("info"))
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

func (rc *reconciler) scan(ctx context.Context) {
	var todo []work
	var settled []uuid.UUID
	err := rc.s.DB.View(func(tx *bolt.Tx) error {
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
			w, ok, err := rc.s.workFor(tx, d)
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
		rc.s.Log.Error().Err(err).Msg("reconcile scan")
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
		rc.s.settle(idle)
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
func (rc *reconciler) launch(w work) {
	jctx, cancel := context.WithCancel(rc.ctx)
	j := &job{cancel: cancel}
	if w.rev != nil {
		j.revision = w.rev.ID
	}
	rc.busy[w.dep.ID] = j
	rc.s.restoring.Delete(w.dep.ID) // done here, or superseded
	rc.wg.Add(1)
	go func(w work) {
		defer rc.wg.Done()
		defer cancel()
		switch {
		case w.rev == nil:
			rc.s.removeDeployment(jctx, w.dep)
		case w.restore:
			rc.s.restore(jctx, w.dep, w.rev, w.why)
		default:
			rc.s.rollOut(jctx, w.dep, w.rev)
		}
		rc.mu.Lock()
		delete(rc.busy, w.dep.ID)
		rc.mu.Unlock()
		rc.s.kick()
		if rc.s.watch != nil {
			rc.s.watch.Poke(w.dep.ID) // see how the agent is now
		}
	}(w)
}

// settle moves new deployments out of AWAITING_DATABASE (the agent's
// database lives with each revision, so once the record exists there is
// nothing more to wait for) and drops deployments with no work left from the
// pending index. Each check is repeated inside the write, so a PATCH that
// queued work meanwhile keeps its deployment pending.
func (s *Service) settle(ids []uuid.UUID) {
	err := s.update(func(tx *bolt.Tx) error {
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
			if _, ok, err := s.workFor(tx, d); err != nil {
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
		s.Log.Error().Err(err).Msg("settle deployments")
	}
}

var errStale = errors.New("revision changed under the reconciler")

// transition moves a revision from one status to another, only if it is
// still in the expected status: a PATCH may have skipped it meanwhile.
func (s *Service) transition(revID string, from []string, to, msg string) error {
	if RevisionTerminal(to) {
		// An agent that failed its deploy wrote its last words just now:
		// they are stored before the status says the revision is over.
		s.agentLog().Flush()
	}
	return s.update(func(tx *bolt.Tx) error {
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
		rev.Status, rev.UpdatedAt, rev.StatusMessage = to, s.now(), msg
		return putRevision(tx, rev)
	})
}

// spec builds the driver's view of a revision, with secrets decrypted.
func (s *Service) spec(rev *revisionRecord) (runtime.Spec, error) {
	env, err := s.OpenSecrets(rev.DeploymentID, rev.Secrets)
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
		sp.TarballPath = s.UploadFile(*src.SourceTarballPath)
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
	if rev.SourceConfig.ResourceSpec != nil {
		sp.ResourceSpec, _ = json.Marshal(rev.SourceConfig.ResourceSpec)
	}
	if len(rev.SecretReferences) > 0 {
		sp.SecretReferences, _ = json.Marshal(rev.SecretReferences)
	}
	return sp, nil
}

// rollOut builds and deploys one revision and, once it is healthy, makes it
// the active revision and stops the one it replaces. A failure leaves the
// active revision serving.
func (s *Service) rollOut(ctx context.Context, dep *deploymentRecord, rev *revisionRecord) {
	log := s.Log.With().Str("deployment_id", dep.ID).Str("revision_id", rev.ID).Logger()
	logs := s.newRevisionLog(rev.ID)
	defer logs.Close()
	fail := func(status string, err error) {
		logs.Add("error", err.Error())
		// The reason is durable before the final status is visible: a
		// client that reads the logs on BUILD_FAILED must find it.
		logs.Flush()
		if terr := s.transition(rev.ID, []string{RevisionBuilding, RevisionDeploying, RevisionAwaitingDeploy}, status, err.Error()); terr != nil && !errors.Is(terr, errStale) {
			log.Error().Err(terr).Msg("record failure")
		}
		log.Warn().Err(err).Str("status", status).Msg("revision failed")
	}
	superseded := func(started bool) {
		if started {
			_ = s.Driver.Stop(context.Background(), dep.ID, rev.ID)
		}
		_ = s.transition(rev.ID, []string{RevisionAwaitingBuild, RevisionBuilding, RevisionAwaitingDeploy, RevisionDeploying},
			RevisionSkipped, "superseded by a newer revision")
	}
	if err := s.transition(rev.ID, []string{RevisionQueued, RevisionInterrupted}, RevisionAwaitingBuild, ""); err != nil {
		return
	}
	spec, err := s.spec(rev)
	if err != nil {
		_ = s.transition(rev.ID, []string{RevisionAwaitingBuild}, RevisionCreateFailed, err.Error())
		return
	}
	if s.transition(rev.ID, []string{RevisionAwaitingBuild}, RevisionBuilding, "") != nil {
		return
	}
	logs.Add("info", "build started on the "+s.Driver.Name()+" runtime")
	artifact, err := s.Driver.Build(ctx, spec, logs.Writer("info"))
	logs.Flush()
	switch {
	case ctx.Err() != nil:
		superseded(false)
		return
	case err != nil:
		fail(RevisionBuildFailed, fmt.Errorf("build failed: %w", err))
		return
	}
	if s.transition(rev.ID, []string{RevisionBuilding}, RevisionAwaitingDeploy, "") != nil ||
		s.transition(rev.ID, []string{RevisionAwaitingDeploy}, RevisionDeploying, "") != nil {
		return
	}
	logs.SetPhase("deploy")
	logs.Add("info", "deploy started")
	endpoint, err := s.Driver.Deploy(ctx, spec, artifact, logs.Writer("info"))
	switch {
	case ctx.Err() != nil:
		superseded(true)
		return
	case err != nil:
		_ = s.Driver.Stop(context.Background(), dep.ID, rev.ID)
		fail(RevisionDeployFailed, fmt.Errorf("deploy failed: %w", err))
		return
	}
	var previous string
	err = s.update(func(tx *bolt.Tx) error {
		d, err := readDeployment(tx, uuid.MustParse(dep.ID))
		if err != nil {
			return err
		}
		cur, err := getRevision(tx, uuid.MustParse(rev.ID))
		if err != nil {
			return err
		}
		if cur.Status != RevisionDeploying || d.Status == DeploymentAwaitingDelete || d.LatestRevisionID == nil || *d.LatestRevisionID != rev.ID {
			return errStale
		}
		if d.ActiveRevisionID != nil {
			previous = *d.ActiveRevisionID
		}
		now := s.now()
		cur.Status, cur.UpdatedAt, cur.StatusMessage = RevisionDeployed, now, ""
		d.ActiveRevisionID, d.Status, d.Endpoint, d.UpdatedAt = &cur.ID, DeploymentReady, endpoint, now
		d.Health = &runtime.Health{Status: runtime.HealthHealthy, Since: now} // it just passed GET /ok
		if endpoint != "" {
			u := s.PublicURL + "/agents/" + d.Name
			d.URL = &u
		}
		return errors.Join(putRevision(tx, cur), putDeployment(tx, d))
	})
	if err != nil {
		superseded(true)
		return
	}
	logs.Add("info", "revision is healthy and now serves the deployment")
	log.Info().Msg("revision deployed")
	if previous != "" && previous != rev.ID {
		if err := s.Driver.Stop(context.Background(), dep.ID, previous); err != nil {
			log.Warn().Err(err).Str("previous_revision_id", previous).Msg("stop replaced revision")
		}
	}
}

// removeDeployment tears a deployment down in the runtime, then deletes its
// records, logs, uploads and (if asked) its tracing project in one transaction.
func (s *Service) removeDeployment(ctx context.Context, dep *deploymentRecord) {
	log := s.Log.With().Str("deployment_id", dep.ID).Logger()
	if err := s.Driver.Remove(ctx, dep.ID); err != nil {
		log.Warn().Err(err).Msg("runtime could not remove the deployment yet; will retry")
		return
	}
	err := s.update(func(tx *bolt.Tx) error {
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
	if err := os.RemoveAll(filepath.Join(s.DataDir, "uploads", dep.ID)); err != nil {
		log.Warn().Err(err).Msg("remove uploaded archives")
	}
	log.Info().Msg("deployment deleted")
}
