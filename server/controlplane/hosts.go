package controlplane

import (
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

// A custom_url's host routes requests to its deployment (see server.byHost),
// so a host belongs to one deployment across the whole install, whatever
// its organization: the host index (store_hosts.go) maps the host's key to that
// deployment and is written in the same transaction as the deployment's
// create, PATCH and DELETE. A second claim of a host is a 409 rather than
// a takeover.

// HostRoute is the deployment a request's Host header names through its
// custom_url.
type HostRoute struct {
	DeploymentID, WorkspaceID, Name string
}

// CustomHost is the host name of a custom_url ("https://agent.example.com",
// "agent.example.com:443/x"), lowercased and without a port or trailing
// dot; "" when it names none.
func CustomHost(custom string) string { return storage.HostKey(custom) }

// customHostOf is the host d's custom_url claims ("" for none).
func customHostOf(d *Deployment) string {
	if d.SourceConfig.CustomURL == nil {
		return ""
	}
	return CustomHost(*d.SourceConfig.CustomURL)
}

// DeploymentByHost finds the deployment whose custom_url names host (a
// Host header, port allowed) in the host index.
func (s *Service) DeploymentByHost(host string) (HostRoute, bool) {
	key := storage.HostKey(host)
	if key == "" {
		return HostRoute{}, false
	}
	var route HostRoute
	var found bool
	err := s.DB.View(func(tx *bolt.Tx) error {
		d, err := deploymentByHostKey(tx, key)
		if err != nil || d == nil {
			return err
		}
		if d.Status == DeploymentAwaitingDelete {
			return nil
		}
		route, found = HostRoute{DeploymentID: d.ID, WorkspaceID: d.TenantID, Name: d.Name}, true
		return nil
	})
	if err != nil {
		s.Log.Error().Err(err).Msg("read custom host")
		return HostRoute{}, false
	}
	return route, found
}
