package controlplane

import (
	"encoding/json"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

// hostsGen counts committed deployment writes. The host table below is
// rebuilt when it moved, so a custom_url takes effect with the commit that
// sets it; counting on commit (not on write) keeps a reader from caching
// a table a rolled-back or not yet committed write would change.
var hostsGen atomic.Uint64

// deploymentsChanged is called by every transaction that writes or deletes
// a deployment record.
func deploymentsChanged(tx *bolt.Tx) {
	tx.OnCommit(func() { hostsGen.Add(1) })
}

// HostRoute is the deployment a request's Host header names through its
// custom_url.
type HostRoute struct {
	DeploymentID, WorkspaceID, Name string
}

type hostTable struct {
	mu  sync.Mutex
	gen uint64
	ok  bool
	m   map[string]HostRoute
}

// CustomHost is the host name of a custom_url ("https://agent.example.com",
// "agent.example.com:443/x"), lowercased and without a port; "" when it
// names none.
func CustomHost(custom string) string {
	raw := strings.TrimSpace(custom)
	if raw == "" {
		return ""
	}
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return strings.ToLower(strings.TrimRight(u.Hostname(), "."))
}

// DeploymentByHost finds the deployment whose custom_url names host (a
// Host header, port allowed).
func (s *Service) DeploymentByHost(host string) (HostRoute, bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimRight(host, "."))
	s.hosts.mu.Lock()
	defer s.hosts.mu.Unlock()
	if g := hostsGen.Load(); !s.hosts.ok || s.hosts.gen != g {
		m := map[string]HostRoute{}
		err := s.DB.View(func(tx *bolt.Tx) error {
			return tx.Bucket([]byte(storage.BucketDeployments)).ForEach(func(_, v []byte) error {
				var d deploymentRecord
				if err := json.Unmarshal(v, &d); err != nil {
					return err
				}
				if d.SourceConfig.CustomURL != nil && d.Status != DeploymentAwaitingDelete {
					if h := CustomHost(*d.SourceConfig.CustomURL); h != "" {
						m[h] = HostRoute{DeploymentID: d.ID, WorkspaceID: d.TenantID, Name: d.Name}
					}
				}
				return nil
			})
		})
		if err != nil {
			s.Log.Error().Err(err).Msg("read custom hosts")
			return HostRoute{}, false
		}
		s.hosts.m, s.hosts.gen, s.hosts.ok = m, g, true
	}
	r, ok := s.hosts.m[host]
	return r, ok
}
