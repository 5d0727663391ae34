package controlplane

import (
	"net/netip"
	"slices"

	"slipway/server/auth"
	"slipway/server/httpx"
)

// AgentsBase is the origin deployments' agents are served on, the base of
// each deployment's url: SLIPWAY_AGENTS_URL when set, else the public URL.
func (s *Service) AgentsBase() string {
	if s.AgentsURL != "" {
		return s.AgentsURL
	}
	return s.PublicURL
}

// present is d as served: secrets redacted, and its url (set once it was
// first served) on the agents origin as configured now, so that setting
// SLIPWAY_AGENTS_URL moves every deployment's url, not only those rolled
// out since.
func (s *Service) present(d *Deployment) Deployment {
	out := d.Redacted()
	if out.Health != nil {
		// The count lives in the watcher (one write per check would be
		// too many); the record holds the last change.
		h := *out.Health
		if rc, ok := s.rec.(*Reconciler); ok && rc.watch != nil {
			h.Checks = rc.watch.Checks(d.ID)
		}
		out.Health = &h
	}
	if out.URL != nil {
		u := s.AgentsBase() + "/agents/" + d.Name
		out.URL = &u
	}
	return out
}

// ownHost reports whether host (a CustomHost) reaches Slipway itself:
// one of OwnHosts (the public URL's, the agents URL's, the listen
// addresses' and, listening on every address, the machine's names and
// addresses), or a loopback or unspecified address. A deployment whose
// custom_url claimed one would be routed the requests meant for Slipway's
// dashboard, API or agents origin, so such a custom_url is refused. Ports
// do not matter: requests are routed by host name alone.
func (s *Service) ownHost(host string) bool {
	if host == "" {
		return false
	}
	if slices.Contains(s.OwnHosts, host) || auth.LoopbackHost(host) {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsUnspecified()
}

// refuseOwnHost answers 422 when custom (a request's custom_url, nil when
// absent) names one of Slipway's own hosts.
func (s *Service) refuseOwnHost(custom *string) error {
	if custom == nil || !s.ownHost(CustomHost(*custom)) {
		return nil
	}
	return httpx.Invalid("value_error",
		"custom_url must name a host of the deployment's own: "+CustomHost(*custom)+" reaches Slipway itself (its public URL, agents URL, listen address or the local machine)",
		"body", "source_config", "custom_url")
}
