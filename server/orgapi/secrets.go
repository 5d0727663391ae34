package orgapi

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"

	"github.com/google/uuid"
	"github.com/julienschmidt/httprouter"
	bolt "go.etcd.io/bbolt"

	"slipway/server/audit"
	"slipway/server/auth"
	"slipway/server/httpx"
	"slipway/server/track"
)

var secretKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,255}$`)

// listWorkspaceSecrets: GET /api/v1/workspaces/current/secrets — the keys only.
func (s *Store) listWorkspaceSecrets(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	if p.WorkspaceID == uuid.Nil {
		return denied("This credential is organization-scoped and requires workspace specification: send the X-Tenant-Id header.")
	}
	out := []map[string]string{}
	return s.viewJSON(w, &out, func(tx *bolt.Tx) error {
		for _, k := range workspaceSecretKeys(tx, p.WorkspaceID) {
			out = append(out, map[string]string{"key": k})
		}
		return nil
	})
}

// upsertWorkspaceSecrets: POST /api/v1/workspaces/current/secrets
// (update_workspace_secrets). A null value deletes the secret. Values are
// sealed under the master key; the event names the keys, never a value.
func (s *Store) upsertWorkspaceSecrets(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := auth.From(r)
	if err := wsAdmin(p, "Changing workspace secrets"); err != nil {
		return err
	}
	reqs, err := decodeList[struct {
		Key   *string `json:"key"`
		Value *string `json:"value"`
	}](r)
	if err != nil {
		return err
	}
	if len(reqs) == 0 || len(reqs) > 100 {
		return httpx.Invalid("value_error", "send 1 to 100 secrets", "body")
	}
	seen := map[string]bool{}
	for i, q := range reqs {
		if q.Key == nil {
			return httpx.Invalid("missing", "Field required", "body", i, "key")
		}
		if !secretKeyRE.MatchString(*q.Key) {
			return httpx.Invalid("string_pattern_mismatch", "key must be a letter or underscore followed by letters, digits or underscores (at most 256)", "body", i, "key")
		}
		if seen[*q.Key] {
			return httpx.Invalid("value_error", "key "+*q.Key+" is listed twice", "body", i, "key")
		}
		seen[*q.Key] = true
		if q.Value != nil && len(*q.Value) > 64*1024 {
			return httpx.Invalid("string_too_long", "value must be at most 65536 bytes", "body", i, "value")
		}
	}
	if s.Sealer == nil {
		return errors.New("workspace secrets: no sealer configured")
	}
	return s.changeJSON(w, map[string]any{}, func(tx *bolt.Tx) error {
		for _, q := range reqs {
			var err error
			if q.Value == nil {
				err = deleteWorkspaceSecret(tx, p.WorkspaceID, *q.Key)
			} else {
				err = putWorkspaceSecret(tx, p.WorkspaceID, *q.Key, s.Sealer.Seal(*q.Value, p.WorkspaceID.String()+"/"+*q.Key))
			}
			if err != nil {
				return fmt.Errorf("workspace secret %s: %w", *q.Key, err)
			}
		}
		return track.Success(tx, r, http.StatusOK, audit.Res(p.WorkspaceID, "workspace"))
	})
}
