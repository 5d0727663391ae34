package servertest

import (
	"cmp"
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/moby/moby/client"
)

// BridgeGateway is the default docker bridge's gateway: an address of
// this host that every container on the bridge reaches. The engine
// records it in the network's IPAM configuration when it creates the
// bridge; an engine that found its bridge interface already there (a
// restart, a machine image taken with it up) records only the subnet, so
// the address is then read from the interface itself.
func BridgeGateway(t testing.TB) netip.Addr {
	t.Helper()
	n, err := DockerEngine(t).NetworkInspect(context.Background(), "bridge", client.NetworkInspectOptions{})
	if err != nil {
		t.Fatalf("inspect the docker bridge network: %v", err)
	}
	for _, c := range n.Network.IPAM.Config {
		if c.Gateway.Is4() {
			return c.Gateway
		}
	}
	name := cmp.Or(n.Network.Options["com.docker.network.bridge.name"], "docker0")
	iface, err := net.InterfaceByName(name)
	if err != nil {
		t.Fatalf("the docker bridge network has no gateway in its IPAM configuration (%+v), and its interface %s: %v", n.Network.IPAM.Config, name, err)
	}
	addrs, err := iface.Addrs()
	if err != nil {
		t.Fatalf("the addresses of the docker bridge %s: %v", name, err)
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() {
			return p.Addr()
		}
	}
	t.Fatalf("the docker bridge %s has no IPv4 address", name)
	return netip.Addr{}
}
