package controlplane

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"

	"slipway/oteltrace"
	"slipway/runtime"
)

// rollOut builds and deploys one revision and, once it is healthy, makes it
// the active revision and stops the one it replaces. A failure leaves the
// active revision serving.
func (rc *Reconciler) rollOut(ctx context.Context, dep *deploymentRecord, rev *revisionRecord) {
	ro := &rollout{rc: rc, dep: dep, rev: rev, logs: rc.logs.newRevisionLog(rev.ID),
		log: rc.Log.With().Str("deployment_id", dep.ID).Str("revision_id", rev.ID).Logger()}
	defer ro.logs.Close()
	ctx, span := rc.revisionSpan(ctx, "revision.rollout", dep, rev)
	defer span.End()
	spec, ok := ro.prepare()
	if !ok {
		return
	}
	artifact, ok := ro.build(ctx, spec)
	if !ok {
		return
	}
	endpoint, ok := ro.deploy(ctx, spec, artifact)
	if !ok {
		return
	}
	previous, err := ro.activate(endpoint)
	if err != nil {
		ro.superseded(true)
		return
	}
	ro.logs.Add("info", "revision is healthy and now serves the deployment")
	ro.log.Info().Msg("revision deployed")
	if previous != "" && previous != rev.ID {
		if err := rc.Driver.Stop(context.Background(), dep.ID, previous); err != nil {
			ro.log.Warn().Err(err).Str("previous_revision_id", previous).Msg("stop replaced revision")
		}
	}
}

// rollout is one revision on its way to serving.
type rollout struct {
	rc   *Reconciler
	dep  *deploymentRecord
	rev  *revisionRecord
	log  zerolog.Logger
	logs *revisionLog
}

// move transitions the revision (see Reconciler.transition).
func (ro *rollout) move(from []string, to, msg string) error {
	return ro.rc.transition(ro.rev.ID, from, to, msg)
}

// prepare claims the revision for this attempt and builds the driver's
// spec; ok is false when the revision went elsewhere or cannot be created.
func (ro *rollout) prepare() (spec runtime.Spec, ok bool) {
	if err := ro.move([]string{RevisionQueued, RevisionInterrupted}, RevisionAwaitingBuild, ""); err != nil {
		return spec, false
	}
	spec, err := ro.rc.spec(ro.rev)
	if err != nil {
		_ = ro.move([]string{RevisionAwaitingBuild}, RevisionCreateFailed, err.Error())
		return spec, false
	}
	return spec, ro.move([]string{RevisionAwaitingBuild}, RevisionBuilding, "") == nil
}

// build runs the driver's build.
func (ro *rollout) build(ctx context.Context, spec runtime.Spec) (artifact string, ok bool) {
	ro.logs.Add("info", "build started on the "+ro.rc.Driver.Name()+" runtime")
	sctx, span := ro.rc.revisionSpan(ctx, "revision.build", ro.dep, ro.rev)
	start := time.Now()
	artifact, err := ro.rc.Driver.Build(sctx, spec, ro.logs.Writer("info"))
	ro.rc.Metrics.phase("build", outcomeOf(ctx, err), start)
	oteltrace.End(span, err)
	ro.logs.Flush()
	switch {
	case ctx.Err() != nil:
		ro.superseded(false)
		return "", false
	case err != nil:
		ro.fail(RevisionBuildFailed, fmt.Errorf("build failed: %w", err))
		return "", false
	}
	return artifact, true
}

// deploy starts the built revision and waits for its health check.
func (ro *rollout) deploy(ctx context.Context, spec runtime.Spec, artifact string) (endpoint string, ok bool) {
	if ro.move([]string{RevisionBuilding}, RevisionAwaitingDeploy, "") != nil ||
		ro.move([]string{RevisionAwaitingDeploy}, RevisionDeploying, "") != nil {
		return "", false
	}
	ro.logs.SetPhase("deploy")
	ro.logs.Add("info", "deploy started")
	sctx, span := ro.rc.revisionSpan(ctx, "revision.deploy", ro.dep, ro.rev)
	start := time.Now()
	if err := ro.rc.withAgentState(sctx, &spec, func(m string) { ro.logs.Add("info", m) }); err != nil {
		ro.rc.Metrics.phase("deploy", outcomeOf(ctx, err), start)
		oteltrace.End(span, err)
		if ctx.Err() != nil {
			ro.superseded(false)
		} else {
			ro.fail(RevisionDeployFailed, fmt.Errorf("deploy failed: %w", err))
		}
		return "", false
	}
	endpoint, err := ro.rc.Driver.Deploy(sctx, spec, artifact, ro.logs.Writer("info"))
	ro.rc.Metrics.phase("deploy", outcomeOf(ctx, err), start)
	oteltrace.End(span, err)
	switch {
	case ctx.Err() != nil:
		ro.superseded(true)
		return "", false
	case err != nil:
		_ = ro.rc.Driver.Stop(context.Background(), ro.dep.ID, ro.rev.ID)
		ro.fail(RevisionDeployFailed, fmt.Errorf("deploy failed: %w", err))
		return "", false
	}
	return endpoint, true
}

// activate makes the deployed revision the deployment's active one, unless
// it is no longer the latest (errStale), and returns the revision it
// replaces.
func (ro *rollout) activate(endpoint string) (previous string, err error) {
	err = ro.rc.update(func(tx *bolt.Tx) error {
		d, err := readDeployment(tx, uuid.MustParse(ro.dep.ID))
		if err != nil {
			return err
		}
		cur, err := getRevision(tx, uuid.MustParse(ro.rev.ID))
		if err != nil {
			return err
		}
		if cur.Status != RevisionDeploying || d.Status == DeploymentAwaitingDelete || d.LatestRevisionID == nil || *d.LatestRevisionID != ro.rev.ID {
			return errStale
		}
		if d.ActiveRevisionID != nil {
			previous = *d.ActiveRevisionID
		}
		now := ro.rc.now()
		cur.Status, cur.UpdatedAt, cur.StatusMessage = RevisionDeployed, now, ""
		d.ActiveRevisionID, d.Status, d.Endpoint, d.UpdatedAt = &cur.ID, DeploymentReady, endpoint, now
		d.Health = &runtime.Health{Status: runtime.HealthHealthy, Since: now} // it just passed GET /ok
		if endpoint != "" {
			u := ro.rc.PublicURL + "/agents/" + d.Name
			d.URL = &u
		}
		return errors.Join(putRevision(tx, cur), putDeployment(tx, d))
	})
	return previous, err
}

// fail records why the revision failed, then its final status.
func (ro *rollout) fail(status string, err error) {
	ro.logs.Add("error", err.Error())
	// The reason is durable before the final status is visible: a client
	// that reads the logs on BUILD_FAILED must find it.
	ro.logs.Flush()
	if terr := ro.move([]string{RevisionBuilding, RevisionDeploying, RevisionAwaitingDeploy}, status, err.Error()); terr != nil && !errors.Is(terr, errStale) {
		ro.log.Error().Err(terr).Msg("record failure")
	}
	ro.log.Warn().Err(err).Str("status", status).Msg("revision failed")
}

// superseded ends a revision a newer one (or a deletion) replaced while it
// was being rolled out, stopping its agent if it had started.
func (ro *rollout) superseded(started bool) {
	if started {
		_ = ro.rc.Driver.Stop(context.Background(), ro.dep.ID, ro.rev.ID)
	}
	_ = ro.move([]string{RevisionAwaitingBuild, RevisionBuilding, RevisionAwaitingDeploy, RevisionDeploying},
		RevisionSkipped, "superseded by a newer revision")
}
