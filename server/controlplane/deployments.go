package controlplane

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/julienschmidt/httprouter"
	bolt "go.etcd.io/bbolt"

	"slipway/server/audit"
	"slipway/server/auth"
	"slipway/server/httpx"
	"slipway/server/track"
	"slipway/storage"
)

// deploymentRecord is a deployment as stored: the API shape with secret
// values sealed, plus what only the control plane needs.
type deploymentRecord struct {
	Deployment
	// DeleteTracingProject is remembered from the DELETE request until the
	// runtime has torn the deployment down.
	DeleteTracingProject bool `json:"delete_tracing_project,omitempty"`
	// Endpoint is where the active revision serves, for the proxy.
	Endpoint string `json:"endpoint,omitempty"`
	// AgentDatabase is the deployment's PostgreSQL database and role, its
	// password sealed, once SLIPWAY_POSTGRES_URL provisioned them
	// (agentdb.go); never in the API.
	AgentDatabase *agentDatabase `json:"agent_database,omitempty"`
	// AgentRedis is the deployment's Redis user and key prefix, its
	// password sealed, once SLIPWAY_REDIS_URL provisioned them for a
	// scaled revision (agentredis.go); never in the API.
	AgentRedis *agentRedis `json:"agent_redis,omitempty"`
}

func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, err
	}
	if err != nil {
		return nil, httpx.BadRequest("Could not read the request body: %v", err)
	}
	return b, nil
}

// createDeployment: POST /v2/deployments → 201 Deployment.
func (s *Service) createDeployment(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	body, err := readBody(r)
	if err != nil {
		return err
	}
	req, err := DecodeCreate(body)
	if err != nil {
		return err
	}
	if err := s.refuseOwnHost(req.SourceConfig.CustomURL); err != nil {
		return err
	}
	if err := s.refuseScale(req.SourceConfig.ResourceSpec); err != nil {
		return err
	}
	if req.SourceRevisionConfig.SourceTarballPath != nil {
		// No upload can have been issued for a deployment that does not exist yet.
		return httpx.Invalid("value_error",
			"source_tarball_path can only be set by PATCH, after uploading to the URL from POST /v2/deployments/{deployment_id}/upload-url",
			"body", "source_revision_config", "source_tarball_path")
	}
	now := s.now()
	id := storage.NewID()
	d := deploymentRecord{Deployment: Deployment{
		ID: id.String(), Name: req.Name, Source: req.Source, SourceConfig: req.SourceConfig,
		SourceRevisionConfig: req.SourceRevisionConfig, Secrets: sealSecrets(s.Sealer, id.String(), req.Secrets),
		SecretReferences: req.SecretReferences, TenantID: p.WorkspaceID.String(),
		CreatedAt: now, UpdatedAt: now, Status: DeploymentAwaitingDatabase,
	}}
	if d.SecretReferences == nil {
		d.SecretReferences = []SecretReference{}
	}
	err = s.update(func(tx *bolt.Tx) error {
		if l := req.SourceConfig.ListenerID; l != nil {
			lid, err := uuid.Parse(*l)
			if err != nil || !listenerExists(tx, p.WorkspaceID, lid) {
				return httpx.Invalid("value_error", "listener_id must be the id of a listener of this workspace (see GET /v2/listeners)",
					"body", "source_config", "listener_id")
			}
		}
		rev := s.newRevision(&d, now)
		d.LatestRevisionID = &rev.ID
		if err := insertDeployment(tx, p.WorkspaceID, &d); err != nil {
			return err
		}
		if err := putRevision(tx, rev); err != nil {
			return err
		}
		if err := ensureTracingProject(tx, p.WorkspaceID, id, req.Name, now); err != nil {
			return err
		}
		return track.Success(tx, r, http.StatusCreated, audit.Res(id, "deployment"), audit.Res(rev.ID, "revision"))
	})
	if err != nil {
		return err
	}
	s.kick()
	httpx.WriteJSON(w, http.StatusCreated, s.present(&d.Deployment))
	return nil
}

// getDeployment: GET /v2/deployments/{id}.
func (s *Service) getDeployment(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p := auth.From(r)
	id, err := httpx.ParseID(ps.ByName("id"), "path", "deployment_id")
	if err != nil {
		return err
	}
	var d *deploymentRecord
	if err := s.DB.View(func(tx *bolt.Tx) error {
		d, err = loadDeployment(tx, p.WorkspaceID, id)
		return err
	}); err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, s.present(&d.Deployment))
	return nil
}

// patchDeployment: PATCH /v2/deployments/{id} → 200 Deployment. A new
// revision is created exactly when the spec's trigger table says so.
func (s *Service) patchDeployment(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p := auth.From(r)
	id, err := httpx.ParseID(ps.ByName("id"), "path", "deployment_id")
	if err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	var out Deployment
	err = s.update(func(tx *bolt.Tx) error {
		d, err := loadDeployment(tx, p.WorkspaceID, id)
		if err != nil {
			return err
		}
		req, err := DecodePatch(body, &d.Deployment)
		if err != nil {
			return err
		}
		if req.SourceConfig != nil {
			if err := s.refuseOwnHost(req.SourceConfig.CustomURL); err != nil {
				return err
			}
			if err := s.refuseScale(req.SourceConfig.ResourceSpec); err != nil {
				return err
			}
		}
		if d.Status == DeploymentAwaitingDelete {
			return httpx.BadRequest("Deployment ID %s is being deleted and cannot be changed.", id)
		}
		if src := req.SourceRevisionConfig; src != nil && src.SourceTarballPath != nil {
			if err := checkTarballPath(tx, id, *src.SourceTarballPath, "body", "source_revision_config", "source_tarball_path"); err != nil {
				return err
			}
		}
		oldHost := customHostOf(&d.Deployment)
		s.applyPatch(d, req)
		if err := moveHost(tx, oldHost, customHostOf(&d.Deployment), id); err != nil {
			return err
		}
		d.UpdatedAt = s.now()
		affected := []audit.Resource{audit.Res(id, "deployment")}
		if req.CreatesRevision() {
			rev := s.newRevision(d, d.UpdatedAt)
			if err := putRevision(tx, rev); err != nil {
				return err
			}
			if err := skipSuperseded(tx, d, rev.ID, d.UpdatedAt); err != nil {
				return err
			}
			d.LatestRevisionID = &rev.ID
			affected = append(affected, audit.Res(rev.ID, "revision"))
			if err := markPending(tx, d.ID); err != nil {
				return err
			}
		}
		out = s.present(&d.Deployment)
		return errors.Join(putDeployment(tx, d), track.Success(tx, r, http.StatusOK, affected...))
	})
	if err != nil {
		return err
	}
	s.kick()
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// applyPatch merges a validated patch into d. Nil means unchanged;
// resource_spec and the lists are replaced whole.
func (s *Service) applyPatch(d *deploymentRecord, req *PatchRequest) {
	if sc := req.SourceConfig; sc != nil {
		cur := &d.SourceConfig
		setIf(&cur.CustomURL, sc.CustomURL)
		setIf(&cur.BuildOnPush, sc.BuildOnPush)
		setIf(&cur.InstallCommand, sc.InstallCommand)
		setIf(&cur.BuildCommand, sc.BuildCommand)
		if sc.ResourceSpec != nil {
			cur.ResourceSpec = sc.ResourceSpec
		}
	}
	if rc := req.SourceRevisionConfig; rc != nil {
		cur := &d.SourceRevisionConfig
		setIf(&cur.RepoRef, rc.RepoRef)
		setIf(&cur.GraphConfigPath, rc.GraphConfigPath)
		setIf(&cur.ImageURI, rc.ImageURI)
		setIf(&cur.SourceTarballPath, rc.SourceTarballPath)
	}
	if req.Secrets != nil {
		d.Secrets = sealSecrets(s.Sealer, d.ID, req.Secrets)
	}
	if req.SecretReferences != nil {
		d.SecretReferences = req.SecretReferences
	}
}

func setIf[T any](dst **T, v *T) {
	if v != nil {
		*dst = v
	}
}

// deleteDeployment: DELETE /v2/deployments/{id} → 204. The deployment shows
// AWAITING_DELETE until the runtime has torn it down, then it is gone.
func (s *Service) deleteDeployment(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p := auth.From(r)
	id, err := httpx.ParseID(ps.ByName("id"), "path", "deployment_id")
	if err != nil {
		return err
	}
	delTracing := false
	if v := r.URL.Query().Get("delete_tracing_project"); v != "" {
		delTracing, err = strconv.ParseBool(v)
		if err != nil {
			return httpx.Invalid("bool_parsing", "Input should be a valid boolean", "query", "delete_tracing_project")
		}
	}
	err = s.update(func(tx *bolt.Tx) error {
		d, err := loadDeployment(tx, p.WorkspaceID, id)
		if err != nil {
			return err
		}
		d.Status = DeploymentAwaitingDelete
		d.DeleteTracingProject = d.DeleteTracingProject || delTracing
		d.UpdatedAt = s.now()
		// A deployment being deleted no longer routes: its host is free
		// for another at once.
		return errors.Join(putDeployment(tx, d), markPending(tx, d.ID), releaseHost(tx, customHostOf(&d.Deployment), id),
			track.Success(tx, r, http.StatusNoContent, audit.Res(id, "deployment")))
	})
	if err != nil {
		return err
	}
	s.kick()
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// csvEnum splits a comma list and checks each value against allowed.
func csvEnum(v, name string, allowed []string) (map[string]bool, error) {
	if v == "" {
		return nil, nil
	}
	set := map[string]bool{}
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		ok := false
		for _, a := range allowed {
			ok = ok || a == s
		}
		if !ok {
			return nil, httpx.Invalid("enum", fmt.Sprintf("Input should be one of %s", strings.Join(allowed, ", ")), "query", name)
		}
		set[s] = true
	}
	return set, nil
}

// listDeployments: GET /v2/deployments → {resources, offset}, newest first.
func (s *Service) listDeployments(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	q := r.URL.Query()
	limit, offset, err := httpx.LimitOffset(q, 20, 100)
	if err != nil {
		return err
	}
	statuses, err := csvEnum(q.Get("status"), "status", DeploymentStatuses)
	if err != nil {
		return err
	}
	types, err := csvEnum(q.Get("deployment_type"), "deployment_type", []string{DeploymentTypeDevFree, DeploymentTypeDev, DeploymentTypeProd})
	if err != nil {
		return err
	}
	var ids map[string]bool
	if v := q.Get("deployment_ids"); v != "" {
		ids = map[string]bool{}
		for _, part := range strings.Split(v, ",") {
			id, err := httpx.ParseID(strings.TrimSpace(part), "query", "deployment_ids")
			if err != nil {
				return err
			}
			ids[id.String()] = true
		}
	}
	after, err := pageCursor(q.Get("cursor"), offset)
	if err != nil {
		return err
	}
	imageVersion := q.Get("image_version")
	query := deploymentQuery{NameContains: strings.ToLower(q.Get("name_contains")), IDs: ids,
		After: after, Offset: offset, Limit: limit}
	if statuses != nil || types != nil || imageVersion != "" {
		query.Match = func(d *deploymentRecord) bool {
			return (statuses == nil || statuses[d.Status]) &&
				(types == nil || d.SourceConfig.DeploymentType != nil && types[*d.SourceConfig.DeploymentType]) &&
				(imageVersion == "" || d.ImageVersion != nil && *d.ImageVersion == imageVersion)
		}
	}
	out := DeploymentList{Resources: []Deployment{}}
	err = s.DB.View(func(tx *bolt.Tx) error {
		page, more, err := workspaceDeploymentPage(tx, p.WorkspaceID, query)
		for _, d := range page {
			out.Resources = append(out.Resources, s.present(&d.Deployment))
		}
		if more {
			last := uuid.MustParse(page[len(page)-1].ID)
			next := base64.RawURLEncoding.EncodeToString(last[:])
			out.NextCursor = &next
		}
		return err
	})
	if err != nil {
		return err
	}
	out.Offset = offset + len(out.Resources)
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// pageCursor reads the cursor query parameter of a list: the opaque
// next_cursor of the page before, which names the last deployment it
// held. A cursor and an offset do not combine (each says where the page
// starts).
func pageCursor(raw string, offset int) (uuid.UUID, error) {
	if raw == "" {
		return uuid.Nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil || len(b) != 16 {
		return uuid.Nil, httpx.Invalid("value_error", "cursor must be the next_cursor of a previous page", "query", "cursor")
	}
	if offset != 0 {
		return uuid.Nil, httpx.Invalid("value_error", "cursor and offset cannot be used together", "query", "offset")
	}
	return uuid.UUID(b), nil
}

// DeploymentByName returns the id of the workspace's deployment called
// name, for the proxy.
func (s *Service) DeploymentByName(ws uuid.UUID, name string) (string, bool) {
	var id string
	_ = s.DB.View(func(tx *bolt.Tx) error {
		if uid, ok := deploymentIDByName(tx, ws, name); ok {
			id = uid.String()
		}
		return nil
	})
	return id, id != ""
}

// AnnotationForwardAuthorization, set to "true" in a deployment's
// source_config.resource_spec.annotations, lets an Authorization header
// reach the deployment's agent through the proxy, for agents that run
// their own authentication. Slipway forwards it only when it did not
// consume it: the caller authenticated to Slipway with X-Api-Key. A bearer
// token Slipway accepted is never forwarded.
const AnnotationForwardAuthorization = "slipway.dev/forward-authorization"

// ForwardsAuthorization reports whether deployment id opted in to receive
// the caller's Authorization header (AnnotationForwardAuthorization).
func (s *Service) ForwardsAuthorization(id string) bool {
	uid, err := uuid.Parse(id)
	if err != nil {
		return false
	}
	var d *deploymentRecord
	if err := s.DB.View(func(tx *bolt.Tx) (err error) {
		d, err = readDeployment(tx, uid)
		return err
	}); err != nil {
		return false
	}
	rs := d.SourceConfig.ResourceSpec
	return rs != nil && rs.Annotations[AnnotationForwardAuthorization] == "true"
}
