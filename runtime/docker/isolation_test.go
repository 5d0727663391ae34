package docker

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/system"
	"github.com/moby/moby/client"
)

func TestIsolation(t *testing.T) {
	debian := []string{"name=seccomp,profile=default"} // what Debian's 20.10 engine reports here
	cases := []struct {
		name        string
		opts        []string
		infoErr     error
		addr        string
		guarantee   []string // each must start one guarantee
		missing     []string // each must start one missing entry
		notMissing  []string
		notGuarantd []string
	}{
		{name: "seccomp only, loopback", opts: debian, addr: "127.0.0.1:8484",
			guarantee:   []string{"the engine filters system calls with seccomp (profile=default)", "Slipway's API listens on loopback (127.0.0.1:8484)"},
			missing:     []string{"user namespace remapping is off", "the engine applies no AppArmor or SELinux profile"},
			notGuarantd: []string{"the engine remaps user namespaces"}},
		{name: "all interfaces", opts: debian, addr: "0.0.0.0:8484",
			missing:     []string{"SLIPWAY_ADDR=0.0.0.0:8484 is not a loopback address"},
			notGuarantd: []string{"Slipway's API listens on loopback"}},
		{name: "a host address", opts: debian, addr: "192.0.2.10:8484", missing: []string{"SLIPWAY_ADDR=192.0.2.10:8484 is not a loopback address"}},
		{name: "localhost and IPv6 loopback", opts: debian, addr: "[::1]:8484", guarantee: []string{"Slipway's API listens on loopback ([::1]:8484)"}},
		{name: "localhost", opts: debian, addr: "localhost:1", guarantee: []string{"Slipway's API listens on loopback (localhost:1)"}},
		{name: "hardened engine", addr: "127.0.0.1:1",
			opts:       []string{"name=apparmor", "name=seccomp,profile=builtin", "name=userns", "name=cgroupns"},
			guarantee:  []string{"the engine confines containers with AppArmor (its default profile)", "the engine remaps user namespaces", "the engine filters system calls with seccomp (profile=builtin)"},
			notMissing: []string{"user namespace remapping is off", "the engine applies no AppArmor"}},
		{name: "rootless", addr: "127.0.0.1:1", opts: []string{"name=seccomp,profile=default", "name=rootless"},
			guarantee: []string{"the engine runs rootless"}, notMissing: []string{"user namespace remapping is off"}},
		{name: "no seccomp", addr: "127.0.0.1:1", missing: []string{"the engine applies no seccomp profile"}},
		{name: "engine silent", addr: "127.0.0.1:1", infoErr: errors.New("timeout"), missing: []string{"the engine did not say"},
			notMissing: []string{"user namespace remapping is off"}},
	}
	has := func(list []string, prefix string) bool {
		for _, s := range list {
			if strings.HasPrefix(s, prefix) {
				return true
			}
		}
		return false
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			iso := isolation(system.Info{SecurityOptions: c.opts}, c.infoErr, c.addr)
			if !strings.HasPrefix(iso.Mode, "containers:") || len(iso.Guarantees) < 6 {
				t.Fatalf("isolation: %+v", iso)
			}
			for _, g := range c.guarantee {
				if !has(iso.Guarantees, g) {
					t.Errorf("no guarantee %q in %q", g, iso.Guarantees)
				}
			}
			for _, m := range c.missing {
				if !has(iso.Missing, m) {
					t.Errorf("nothing missing says %q: %q", m, iso.Missing)
				}
			}
			for _, m := range c.notMissing {
				if has(iso.Missing, m) {
					t.Errorf("missing says %q: %q", m, iso.Missing)
				}
			}
			for _, g := range c.notGuarantd {
				if has(iso.Guarantees, g) {
					t.Errorf("guarantees say %q: %q", g, iso.Guarantees)
				}
			}
		})
	}
}

// infoEngine answers Info and nothing else.
type infoEngine struct {
	Engine
	calls int
}

func (e *infoEngine) Info(context.Context, client.InfoOptions) (client.SystemInfoResult, error) {
	e.calls++
	return client.SystemInfoResult{Info: system.Info{SecurityOptions: []string{"name=seccomp,profile=default"}}}, nil
}

// The engine is asked once: GET /info shows the isolation on every call.
func TestIsolationAsksOnce(t *testing.T) {
	e := &infoEngine{}
	d := &Driver{Client: e, APIAddr: "127.0.0.1:8484"}
	a, b := d.Isolation(), d.Isolation()
	if e.calls != 1 || strings.Join(a.Guarantees, "|") != strings.Join(b.Guarantees, "|") {
		t.Fatalf("%d calls", e.calls)
	}
}
