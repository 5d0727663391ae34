package orgapi

import (
	"sort"
	"strings"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/server/audit"
	"slipway/server/auth"
	"slipway/storage"
)

// Host administration (`slipway admin`, over the admin socket). These
// writes go through the same committer as the API's, so they are durable
// and serialized with them. Each takes a Record, which writes the change's
// audit event in its transaction. Their errors pass through httpError, so
// the admin server can answer with the right status and a detail the CLI
// prints as is.

// Record writes the audit event of a host administrator's change to org,
// inside the transaction tx that makes it, naming the resources it
// touched: the change and its event commit or fail together.
type Record func(tx *bolt.Tx, org uuid.UUID, res ...audit.Resource) error

// Plans an organization can be on.
var Plans = []string{"free", "plus", "enterprise"}

// AdminFlags are the organization config flags the host administrator may
// set, with a description.
var AdminFlags = map[string]string{
	"can_use_audit_logs": "read the audit log (GET /api/v1/audit-logs); Enterprise plan, non-personal organizations only",
}

func checkPlan(plan string) error {
	for _, p := range Plans {
		if plan == p {
			return nil
		}
	}
	return refused("Unknown plan %q: use one of %s.", plan, strings.Join(Plans, ", "))
}

// CreateOrg creates an organization with a Default workspace.
func (s *Store) CreateOrg(name, plan string, personal bool, record Record) (Org, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 200 {
		return Org{}, httpError(refused("The organization name must be 1 to 200 characters."))
	}
	if plan == "" {
		plan = "free"
	}
	if err := checkPlan(plan); err != nil {
		return Org{}, httpError(err)
	}
	now := s.now()
	org := Org{ID: storage.NewID(), DisplayName: name, Plan: plan, IsPersonal: personal, Config: map[string]any{}, CreatedAt: now}
	ws := Workspace{ID: storage.NewID(), OrgID: org.ID, DisplayName: "Default", CreatedAt: now}
	org.DefaultWorkspaceID = ws.ID
	err := s.update(func(tx *bolt.Tx) error {
		if err := putWorkspace(tx, &ws); err != nil {
			return err
		}
		if err := putOrg(tx, &org); err != nil {
			return err
		}
		return record(tx, org.ID, audit.Resource{UID: org.ID.String(), Type: "organization", Name: org.DisplayName},
			audit.Res(ws.ID, "workspace"))
	})
	return org, httpError(err)
}

// ListOrgs returns every organization, oldest first.
func (s *Store) ListOrgs() ([]Org, error) {
	var out []Org
	err := s.DB.View(func(tx *bolt.Tx) error {
		var err error
		out, err = allOrgs(tx)
		return err
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, err
}

// GetOrg reads one organization.
func (s *Store) GetOrg(id uuid.UUID) (Org, error) {
	var org Org
	err := s.DB.View(func(tx *bolt.Tx) error { return getOrg(tx, id, &org) })
	return org, httpError(err)
}

// changeOrg reads, changes and writes one organization in one transaction,
// with the change's audit event.
func (s *Store) changeOrg(id uuid.UUID, change func(*Org) error, record Record) (Org, error) {
	var org Org
	err := s.update(func(tx *bolt.Tx) error {
		org = Org{}
		if err := getOrg(tx, id, &org); err != nil {
			return err
		}
		if org.Config == nil {
			org.Config = map[string]any{}
		}
		if err := change(&org); err != nil {
			return err
		}
		if err := putOrg(tx, &org); err != nil {
			return err
		}
		return record(tx, org.ID, audit.Res(org.ID, "organization"))
	})
	return org, httpError(err)
}

// SetPlan moves an organization to plan.
func (s *Store) SetPlan(id uuid.UUID, plan string, record Record) (Org, error) {
	if err := checkPlan(plan); err != nil {
		return Org{}, httpError(err)
	}
	return s.changeOrg(id, func(o *Org) error { o.Plan = plan; return nil }, record)
}

// SetFlag sets a config flag (value nil unsets it, so the install-wide
// default applies again). Flags are refused for personal organizations.
func (s *Store) SetFlag(id uuid.UUID, flag string, value *bool, record Record) (Org, error) {
	if _, ok := AdminFlags[flag]; !ok {
		names := make([]string, 0, len(AdminFlags))
		for n := range AdminFlags {
			names = append(names, n)
		}
		sort.Strings(names)
		return Org{}, httpError(refused("Unknown flag %q: the flags are %s.", flag, strings.Join(names, ", ")))
	}
	return s.changeOrg(id, func(o *Org) error {
		if o.IsPersonal {
			return conflict("Organization %s is a personal organization: config flags cannot be set on personal organizations.", o.ID)
		}
		if value == nil {
			delete(o.Config, flag)
		} else {
			o.Config[flag] = *value
		}
		return nil
	}, record)
}

// CreateOrgAdminKey creates an organization-scoped service key with the
// Organization Admin role (as Bootstrap does for the first organization),
// acting as its own service identity. The key is returned once; only its
// hash is stored.
func (s *Store) CreateOrgAdminKey(id uuid.UUID, record Record) (string, APIKey, error) {
	key := auth.NewKey("slw_sk")
	var k APIKey
	err := s.update(func(tx *bolt.Tx) error {
		var org Org
		if err := getOrg(tx, id, &org); err != nil {
			return err
		}
		now := s.now()
		k = APIKey{ID: storage.NewID(), Kind: auth.KindServiceKey, Hash: auth.Hash(key), ShortKey: auth.ShortKey(key),
			Description: "Organization admin key (slipway admin)", OrgID: org.ID, UserID: storage.NewID(),
			OrgRole: auth.OrgAdmin, CreatedAt: now}
		svc := User{ID: k.UserID, OrgID: org.ID, DisplayName: "service key " + k.ShortKey, OrgRole: auth.OrgAdmin,
			WorkspaceRoles: map[uuid.UUID]string{}, Service: true, CreatedAt: now}
		if org.DefaultWorkspaceID != uuid.Nil && workspaceInOrg(tx, org.ID, org.DefaultWorkspaceID) {
			ws := org.DefaultWorkspaceID
			k.DefaultWorkspaceID = &ws
			svc.WorkspaceRoles[ws] = auth.WSAdmin
		}
		if err := putUser(tx, &svc); err != nil {
			return err
		}
		if err := putKey(tx, &k); err != nil {
			return err
		}
		return record(tx, org.ID, audit.Res(k.ID, "service_key"), audit.Res(svc.ID, "user"))
	})
	if err != nil {
		return "", APIKey{}, httpError(err)
	}
	return key, k, nil
}
