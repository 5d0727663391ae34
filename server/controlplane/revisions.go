package controlplane

import (
	"errors"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/julienschmidt/httprouter"
	bolt "go.etcd.io/bbolt"

	"slipway/server/audit"
	"slipway/server/auth"
	"slipway/server/httpx"
	"slipway/server/track"
	"slipway/storage"
)

// revisionRecord is a revision as stored: the API shape plus a snapshot of
// everything the runtime needs to build and run exactly this revision, so a
// later PATCH never changes what an older revision (or a redeploy of it) runs.
type revisionRecord struct {
	Revision
	WorkspaceID      string            `json:"workspace_id"`
	DeploymentName   string            `json:"deployment_name"`
	SourceConfig     SourceConfig      `json:"source_config"`
	Secrets          []Secret          `json:"secrets"` // sealed
	SecretReferences []SecretReference `json:"secret_references"`
	// StatusMessage says why a revision failed or is waiting.
	StatusMessage string `json:"status_message,omitempty"`
	// Attempt counts build/deploy attempts, bumped by retries after a restart.
	Attempt int `json:"attempt"`
}

// RevisionView is a revision as the API shows it. The spec's statuses have
// no "superseded": after a rollback the revision it replaced still reads
// DEPLOYED. IsActive says which one serves: true for exactly the
// deployment's active_revision_id, read in the same transaction, so list
// and get agree with the deployment.
type RevisionView struct {
	Revision
	IsActive bool `json:"is_active"`
}

func viewRevision(d *deploymentRecord, rev *revisionRecord) RevisionView {
	return RevisionView{Revision: rev.Revision, IsActive: d.ActiveRevisionID != nil && *d.ActiveRevisionID == rev.ID}
}

// newRevision snapshots d as a new QUEUED revision. An internal_source
// deployment without an uploaded archive has nothing to build yet: its
// revision waits in AWAITING_BUILD until a PATCH brings a source.
func (s *Service) newRevision(d *deploymentRecord, now time.Time) *revisionRecord {
	rev := &revisionRecord{
		Revision: Revision{ID: storage.NewID().String(), DeploymentID: d.ID, CreatedAt: now, UpdatedAt: now,
			Status: RevisionQueued, Source: d.Source, SourceRevisionConfig: d.SourceRevisionConfig},
		WorkspaceID: d.TenantID, DeploymentName: d.Name, SourceConfig: d.SourceConfig,
		Secrets: d.Secrets, SecretReferences: d.SecretReferences,
	}
	if msg := missingSource(d.Source, d.SourceRevisionConfig); msg != "" {
		rev.Status, rev.StatusMessage = RevisionAwaitingBuild, msg
	}
	return rev
}

// missingSource says what a revision still lacks before it can be built,
// or "" when it has a source.
func missingSource(source string, src SourceRevisionConfig) string {
	switch {
	case source == SourceInternalSource && src.SourceTarballPath == nil:
		return "waiting for a source archive: upload one and PATCH source_revision_config.source_tarball_path"
	case (source == SourceInternalDocker || source == SourceExternalDocker) && src.ImageURI == nil:
		return "waiting for an image: PATCH source_revision_config.image_uri"
	}
	return ""
}

// skipSuperseded ends every revision of d that has not started building and
// is not the new one: it will never be deployed. Revisions already building
// are cancelled by the reconciler, which sees they are no longer latest.
//
// A revision that was only waiting for its source (the one POST makes for
// an internal_source deployment before anything is uploaded, or for a
// docker source before an image_uri) is removed instead: it never had
// anything to build, so the revision list would otherwise show a SKIPPED
// placeholder beside every new deployment's first real revision.
func skipSuperseded(tx *bolt.Tx, d *deploymentRecord, keep string, now time.Time) error {
	var skip, drop []*revisionRecord
	err := eachRevisionOf(tx, uuid.MustParse(d.ID), false, func(rev *revisionRecord) bool {
		switch {
		case rev.ID == keep:
		case rev.Status == RevisionAwaitingBuild && missingSource(rev.Source, rev.SourceRevisionConfig) != "":
			drop = append(drop, rev)
		case rev.Status == RevisionQueued || rev.Status == RevisionAwaitingBuild || rev.Status == RevisionCreating:
			skip = append(skip, rev)
		}
		return true
	})
	for _, rev := range skip {
		rev.Status, rev.UpdatedAt, rev.StatusMessage = RevisionSkipped, now, "superseded by a newer revision"
		err = errors.Join(err, putRevision(tx, rev))
	}
	for _, rev := range drop {
		err = errors.Join(err, deleteRevision(tx, uuid.MustParse(d.ID), uuid.MustParse(rev.ID)))
	}
	return err
}

func deploymentAndRevisionIDs(ps httprouter.Params) (uuid.UUID, uuid.UUID, error) {
	dep, err := httpx.ParseID(ps.ByName("id"), "path", "deployment_id")
	if err != nil {
		return uuid.Nil, uuid.Nil, err
	}
	rid, err := httpx.ParseID(ps.ByName("rid"), "path", "revision_id")
	return dep, rid, err
}

// listRevisions: GET /v2/deployments/{id}/revisions → {resources, offset}, newest first.
func (s *Service) listRevisions(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p := auth.From(r)
	id, err := httpx.ParseID(ps.ByName("id"), "path", "deployment_id")
	if err != nil {
		return err
	}
	limit, offset, err := httpx.LimitOffset(r.URL.Query(), 20, 100)
	if err != nil {
		return err
	}
	statuses, err := csvEnum(r.URL.Query().Get("status"), "status", RevisionStatuses)
	if err != nil {
		return err
	}
	out := List[RevisionView]{Resources: []RevisionView{}}
	err = s.DB.View(func(tx *bolt.Tx) error {
		d, err := loadDeployment(tx, p.WorkspaceID, id)
		if err != nil {
			return err
		}
		skipped := 0
		return eachRevisionOf(tx, id, true, func(rev *revisionRecord) bool {
			if statuses != nil && !statuses[rev.Status] {
				return true
			}
			if skipped < offset {
				skipped++
				return true
			}
			if len(out.Resources) == limit {
				return false
			}
			out.Resources = append(out.Resources, viewRevision(d, rev))
			return true
		})
	})
	if err != nil {
		return err
	}
	out.Offset = offset + len(out.Resources)
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// loadRevision returns a revision of a deployment visible to the workspace.
func loadRevision(tx *bolt.Tx, ws, dep, rid uuid.UUID) (*deploymentRecord, *revisionRecord, error) {
	d, err := loadDeployment(tx, ws, dep)
	if err != nil {
		return nil, nil, err
	}
	rev, err := revisionOf(tx, dep, rid)
	return d, rev, err
}

// getRevisionHandler: GET /v2/deployments/{id}/revisions/{rid}.
func (s *Service) getRevisionHandler(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p := auth.From(r)
	dep, rid, err := deploymentAndRevisionIDs(ps)
	if err != nil {
		return err
	}
	var out RevisionView
	if err := s.DB.View(func(tx *bolt.Tx) error {
		d, rev, err := loadRevision(tx, p.WorkspaceID, dep, rid)
		if err == nil {
			out = viewRevision(d, rev)
		}
		return err
	}); err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// redeploy: POST /v2/deployments/{id}/revisions/{rid}/redeploy → 200
// Deployment. The revision is queued again with its own snapshot and
// becomes the latest; it takes traffic once healthy, like any new revision.
func (s *Service) redeploy(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p := auth.From(r)
	dep, rid, err := deploymentAndRevisionIDs(ps)
	if err != nil {
		return err
	}
	var out Deployment
	err = s.update(func(tx *bolt.Tx) error {
		d, rev, err := loadRevision(tx, p.WorkspaceID, dep, rid)
		if err != nil {
			return err
		}
		switch {
		case d.Status == DeploymentAwaitingDelete:
			return httpx.BadRequest("Deployment ID %s is being deleted.", dep)
		case d.ActiveRevisionID != nil && *d.ActiveRevisionID == rev.ID:
			return httpx.BadRequest("Revision ID %s is already the active revision.", rid)
		case !RevisionTerminal(rev.Status):
			return httpx.BadRequest("Revision ID %s is still %s; wait for it to finish.", rid, rev.Status)
		case missingSource(rev.Source, rev.SourceRevisionConfig) != "":
			return httpx.BadRequest("Revision ID %s has no source to deploy.", rid)
		}
		now := s.now()
		rev.Status, rev.UpdatedAt, rev.StatusMessage = RevisionQueued, now, "redeploy requested"
		if err := putRevision(tx, rev); err != nil {
			return err
		}
		if err := skipSuperseded(tx, d, rev.ID, now); err != nil {
			return err
		}
		d.LatestRevisionID, d.UpdatedAt = &rev.ID, now
		out = s.present(&d.Deployment)
		return errors.Join(putDeployment(tx, d), markPending(tx, d.ID),
			track.Success(tx, r, http.StatusOK, audit.Res(dep, "deployment"), audit.Res(rid, "revision")))
	})
	if err != nil {
		return err
	}
	s.kick()
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}
