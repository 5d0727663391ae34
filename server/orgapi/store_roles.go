package orgapi

import (
	"errors"
	"strings"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

const (
	bucketRoles = "roles"         // custom roles; built-in ones are not stored
	idxOrgRoles = "idx_org_roles" // org id ‖ role id → nil
)

// getRole reads a custom role; a missing one is storage.ErrNotFound.
func getRole(tx *bolt.Tx, id uuid.UUID) (*Role, error) {
	var r Role
	if err := storage.Get(tx, bucketRoles, storage.Key(id), &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// orgRoles reads the custom roles of org in id order.
func orgRoles(tx *bolt.Tx, org uuid.UUID) ([]Role, error) {
	return readIndexed[Role](tx, idxOrgRoles, bucketRoles, org, "role")
}

// customRoleNamed reports whether a custom role of org other than except
// is called name (case-insensitively).
func customRoleNamed(tx *bolt.Tx, org uuid.UUID, name string, except uuid.UUID) bool {
	for _, id := range storage.PrefixIDs(tx, idxOrgRoles, storage.Key(org), false) {
		var role Role
		if id != except && storage.Get(tx, bucketRoles, storage.Key(id), &role) == nil && strings.EqualFold(role.DisplayName, name) {
			return true
		}
	}
	return false
}

// putRole writes a custom role with its organization index entry.
func putRole(tx *bolt.Tx, role *Role) error {
	return errors.Join(storage.Put(tx, bucketRoles, storage.Key(role.ID), role),
		tx.Bucket([]byte(idxOrgRoles)).Put(storage.Key(*role.OrgID, role.ID), nil))
}

// removeRole deletes a custom role and its index entry.
func removeRole(tx *bolt.Tx, role *Role) error {
	return errors.Join(storage.Delete(tx, bucketRoles, storage.Key(role.ID)),
		tx.Bucket([]byte(idxOrgRoles)).Delete(storage.Key(*role.OrgID, role.ID)))
}
