package admin

import (
	"fmt"
	"net/http"
	"sort"

	"github.com/google/uuid"
	"github.com/julienschmidt/httprouter"
	bolt "go.etcd.io/bbolt"

	"slipway/server/audit"
	"slipway/server/httpx"
)

// `slipway admin audit reindex` repairs the operation index that `audit
// verify` checks: Slipway does not rebuild it by itself (at start-up, say),
// because a silent rebuild would erase the evidence of an edit before
// anyone ran verify. Each organization's index is rebuilt from its chain
// in one transaction, with an update_audit_index event in that chain.

// ReindexRequest is the body of POST /v1/audit/reindex.
type ReindexRequest struct {
	Org string `json:"organization_id,omitempty"`
}

// ReindexResponse says how many events were indexed per organization.
type ReindexResponse struct {
	Reindexed map[string]int `json:"reindexed"`
}

func (s *Server) reindex(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	var req ReindexRequest
	if err := httpx.DecodeJSON(r, &req, true); err != nil {
		return err
	}
	var orgs []uuid.UUID
	if req.Org != "" {
		id, err := uuid.Parse(req.Org)
		if err != nil {
			return httpx.BadRequest("%q is not an organization id (a UUID).", req.Org)
		}
		orgs = []uuid.UUID{id}
	} else if err := s.DB.View(func(tx *bolt.Tx) error { orgs = audit.Orgs(tx); return nil }); err != nil {
		return err
	}
	out := ReindexResponse{Reindexed: map[string]int{}}
	for _, org := range orgs {
		n := 0
		err := s.update(func(tx *bolt.Tx) error {
			var err error
			if n, err = s.Log.Reindex(tx, org); err != nil || n == 0 {
				return err
			}
			res := audit.Resource{UID: org.String(), Type: "audit_log", Name: fmt.Sprintf("%d event(s) reindexed", n)}
			return s.Log.Append(tx, hostEntry(r, "update_audit_index", org, true, http.StatusOK, "", []audit.Resource{res}))
		})
		if err != nil {
			return fmt.Errorf("organization %s: %w", org, err)
		}
		if n > 0 {
			out.Reindexed[org.String()] = n
		}
	}
	s.Logger.Info().Interface("reindexed", out.Reindexed).Msg("admin: audit operation index rebuilt")
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (x *cli) auditReindex() int {
	org := x.fs.String("org", "", "only this organization")
	if _, err := x.parse(0); err != nil {
		return x.badArgs(err)
	}
	var out ReindexResponse
	if err := x.c.Do("POST", "/v1/audit/reindex", ReindexRequest{Org: *org}, &out); err != nil {
		return x.fail(err)
	}
	if *x.asJSON {
		return x.printJSON(out)
	}
	ids := make([]string, 0, len(out.Reindexed))
	for id := range out.Reindexed {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		fmt.Fprintf(x.stdout, "organization %s: reindexed %d event(s)\n", id, out.Reindexed[id])
	}
	fmt.Fprintf(x.stdout, "reindexed %d organization(s)\n", len(ids))
	return 0
}
