package controlplane

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/julienschmidt/httprouter"
	bolt "go.etcd.io/bbolt"

	"slipway/server/audit"
	"slipway/server/auth"
	"slipway/server/httpx"
	"slipway/server/track"
)

// TracingProject is the tracing project created with a deployment, under
// the deployment's name, as the hosted service does.
type TracingProject struct {
	ID           string    `json:"id"`
	WorkspaceID  string    `json:"tenant_id"`
	Name         string    `json:"name"`
	DeploymentID string    `json:"deployment_id"`
	Description  *string   `json:"description"`
	CreatedAt    time.Time `json:"created_at"`
}

// TracingProjectExists reports whether ws has a tracing project called name.
func (s *Service) TracingProjectExists(ws uuid.UUID, name string) bool {
	found := false
	_ = s.DB.View(func(tx *bolt.Tx) error {
		found = tracingProjectNamed(tx, ws, name)
		return nil
	})
	return found
}

// liveDeployment returns the id of the deployment that still owns tp (one
// of that name, with the id the project records), or "".
func liveDeployment(tx *bolt.Tx, ws uuid.UUID, tp *TracingProject) string {
	if id, ok := deploymentIDByName(tx, ws, tp.Name); ok && id.String() == tp.DeploymentID {
		return tp.DeploymentID
	}
	return ""
}

// updateTracingProject: PATCH /api/v1/sessions/{session_id}
// (update_tracer_session). A project a deployment still owns keeps the
// deployment's name, since the two are tied by name.
func (s *Service) updateTracingProject(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	p := auth.From(r)
	id, err := httpx.ParseID(ps.ByName("session_id"), "path", "session_id")
	if err != nil {
		return err
	}
	var req struct {
		Name        *string `json:"name"`
		Description *string `json:"description"`
	}
	if err := httpx.DecodeJSON(r, &req, true); err != nil {
		return err
	}
	if req.Name != nil && (strings.TrimSpace(*req.Name) == "" || len(*req.Name) > 200) {
		return httpx.Invalid("value_error", "name must be 1 to 200 characters", "body", "name")
	}
	if req.Description != nil && len(*req.Description) > 1000 {
		return httpx.Invalid("string_too_long", "description must be at most 1000 characters", "body", "description")
	}
	var out TracingProject
	err = s.update(func(tx *bolt.Tx) error {
		tp, err := tracingProject(tx, p.WorkspaceID, id)
		if err != nil {
			return err
		}
		if req.Name != nil && *req.Name != tp.Name {
			if dep := liveDeployment(tx, p.WorkspaceID, tp); dep != "" {
				return httpx.BadRequest("Tracing project %s belongs to deployment %s and keeps its name.", tp.ID, dep)
			}
			if err := renameTracingProject(tx, p.WorkspaceID, tp, *req.Name); err != nil {
				return err
			}
		}
		if req.Description != nil {
			tp.Description = req.Description
		}
		out = *tp
		return errors.Join(putTracingProject(tx, tp),
			track.Success(tx, r, http.StatusOK, audit.Res(id, "tracer_session")))
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// removeTracingProjects deletes projects by id in one transaction, refusing
// any a deployment still owns (delete it with delete_tracing_project=true).
func (s *Service) removeTracingProjects(r *http.Request, ids []uuid.UUID) error {
	p := auth.From(r)
	return s.update(func(tx *bolt.Tx) error {
		res := make([]audit.Resource, 0, len(ids))
		for _, id := range ids {
			tp, err := tracingProject(tx, p.WorkspaceID, id)
			if err != nil {
				return err
			}
			if dep := liveDeployment(tx, p.WorkspaceID, tp); dep != "" {
				return httpx.BadRequest("Tracing project %s belongs to deployment %s; delete the deployment with delete_tracing_project=true.", tp.ID, dep)
			}
			if err := deleteTracingProject(tx, p.WorkspaceID, tp.Name); err != nil {
				return err
			}
			res = append(res, audit.Res(id, "tracer_session"))
		}
		return track.Success(tx, r, http.StatusOK, res...)
	})
}

// deleteTracingProjectHandler: DELETE /api/v1/sessions/{session_id} (delete_tracer_session).
func (s *Service) deleteTracingProjectHandler(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id, err := httpx.ParseID(ps.ByName("session_id"), "path", "session_id")
	if err != nil {
		return err
	}
	if err := s.removeTracingProjects(r, []uuid.UUID{id}); err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{})
	return nil
}

// deleteTracingProjects: DELETE /api/v1/sessions?session_ids=...
// (delete_tracer_sessions): all or none.
func (s *Service) deleteTracingProjects(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	raw := r.URL.Query()["session_ids"]
	if len(raw) == 0 {
		return httpx.Invalid("missing", "Field required", "query", "session_ids")
	}
	if len(raw) > 100 {
		return httpx.Invalid("too_long", "at most 100 session_ids", "query", "session_ids")
	}
	ids := make([]uuid.UUID, 0, len(raw))
	seen := map[uuid.UUID]bool{}
	for i, v := range raw {
		id, err := httpx.ParseID(v, "query", "session_ids", i)
		if err != nil {
			return err
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if err := s.removeTracingProjects(r, ids); err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{})
	return nil
}

// listTracingProjects: GET /api/v1/sessions[?name=] — the workspace's
// tracing projects (the hosted service calls them tracer sessions).
func (s *Service) listTracingProjects(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	name := r.URL.Query().Get("name")
	var out []TracingProject
	err := s.DB.View(func(tx *bolt.Tx) (err error) {
		out, err = workspaceTracingProjects(tx, p.WorkspaceID, name)
		return err
	})
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}
