package controlplane

import (
	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
)

// The lookups other parts of `serve` (the dashboard's charts) make on
// deployments they do not own.

// CheckDeployment answers nil when workspace ws has deployment id, and
// the API's not-found error otherwise (another workspace's deployment is
// answered like a missing one).
func (s *Service) CheckDeployment(ws, id uuid.UUID) error {
	return s.DB.View(func(tx *bolt.Tx) error {
		_, err := loadDeployment(tx, ws, id)
		return err
	})
}

// DeploymentExists reports whether deployment id exists in any workspace.
func (s *Service) DeploymentExists(id string) bool {
	uid, err := uuid.Parse(id)
	if err != nil {
		return false
	}
	found := false
	_ = s.DB.View(func(tx *bolt.Tx) error {
		_, err := readDeployment(tx, uid)
		found = err == nil
		return nil
	})
	return found
}
