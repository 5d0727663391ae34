package docker

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/moby/moby/api/types/system"
	"github.com/moby/moby/client"

	"slipway/runtime"
)

// Isolation reports what separates deployment code from Slipway and from
// other deployments: what harden and the per-deployment networks give,
// and what the engine says of its own security options (seccomp,
// AppArmor, user namespaces, rootless mode). It asks the engine once.
func (d *Driver) Isolation() runtime.Isolation {
	d.isoOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		res, err := d.Client.Info(ctx, client.InfoOptions{})
		d.iso = isolation(res.Info, err, d.APIAddr)
		if d.DefaultMemoryMB > 0 {
			d.iso.Guarantees = append(d.iso.Guarantees, fmt.Sprintf("every container whose resource_spec names no memory limit gets %d MiB "+
				"(SLIPWAY_DEFAULT_MEMORY_LIMIT_MB), and at most %d processes: a memory hog or a fork bomb is stopped inside its container", d.DefaultMemoryMB, pidsLimit))
		} else {
			d.iso.Missing = append(d.iso.Missing, "SLIPWAY_DEFAULT_MEMORY_LIMIT_MB is 0: a container whose resource_spec names no memory limit can use all of the host's memory")
		}
	})
	return d.iso
}

// isolation is Isolation's report for an engine's info (or the error
// asking for it) and Slipway's listen address.
func isolation(info system.Info, infoErr error, apiAddr string) runtime.Isolation {
	iso := runtime.Isolation{
		Mode: fmt.Sprintf("containers: own network per deployment, no capabilities, no-new-privileges, pids limit %d, "+
			"user %s and read-only root for images Slipway builds", pidsLimit, agentUser),
		Guarantees: []string{
			"every container of a deployment (agent, init containers, sidecars) has its own PID, IPC, UTS, mount and cgroup namespaces: " +
				"it sees no process of the host, neither Slipway nor another deployment's agent, so it can signal, ptrace or read " +
				"the environment or memory of none of them",
			"every capability is dropped and no-new-privileges is set (set-uid files and file capabilities grant nothing); " +
				"no container is privileged, none gets a device",
			"nothing of the host's filesystem is mounted: Slipway's data dir (master key, database, admin socket, uploads, secrets) " +
				"and the Docker socket are out of reach; a deployment's containers get only its own Docker volumes, " +
				"and volume types that would mount anything else fail the deploy",
			"each deployment has its own bridge network: its containers cannot reach another deployment's containers",
			"images Slipway builds run the agent as uid 65534 on a read-only root filesystem with a tmpfs /tmp; " +
				"their build context holds only the uploaded source",
			"secrets reach containers as environment when they start, never through the image: no layer holds them",
		},
		Missing: []string{
			"images given by reference (internal_docker and external_docker image_uri, init containers, sidecars) run as the user " +
				"their image names, root included, with a writable root filesystem (still without capabilities)",
			"image builds (install_command, build_command, dockerfile_lines) run in the engine's builder as the base image's user, " +
				"with Docker's default capabilities and the default bridge network; they see only the uploaded source",
			"containers reach networks outside the host (agents call model APIs), and any service of the host that listens on " +
				"an address other than loopback",
		},
	}
	if g, m := apiReach(apiAddr); g != "" {
		iso.Guarantees = append(iso.Guarantees, g)
	} else {
		iso.Missing = append(iso.Missing, m)
	}
	if infoErr != nil {
		iso.Missing = append(iso.Missing, "the engine did not say which seccomp, AppArmor and user-namespace settings are in force: "+infoErr.Error())
		return iso
	}
	opts := map[string]string{} // option name → its settings, as the engine lists them
	for _, o := range info.SecurityOptions {
		name, rest := "", []string{}
		for _, kv := range strings.Split(o, ",") {
			if v, ok := strings.CutPrefix(kv, "name="); ok {
				name = v
			} else {
				rest = append(rest, kv)
			}
		}
		if name != "" {
			opts[name] = strings.Join(rest, ",")
		}
	}
	if s, ok := opts["seccomp"]; ok {
		iso.Guarantees = append(iso.Guarantees, "the engine filters system calls with seccomp ("+orDefault(s)+")")
	} else {
		iso.Missing = append(iso.Missing, "the engine applies no seccomp profile: every system call reaches the host kernel")
	}
	if s, ok := opts["apparmor"]; ok {
		iso.Guarantees = append(iso.Guarantees, "the engine confines containers with AppArmor ("+orDefault(s)+")")
	} else if _, ok := opts["selinux"]; ok {
		iso.Guarantees = append(iso.Guarantees, "the engine labels containers with SELinux")
	} else {
		iso.Missing = append(iso.Missing, "the engine applies no AppArmor or SELinux profile")
	}
	if _, ok := opts["userns"]; ok {
		iso.Guarantees = append(iso.Guarantees, "the engine remaps user namespaces: uid 0 in a container is an unprivileged uid on the host")
	} else if _, ok := opts["rootless"]; ok {
		iso.Guarantees = append(iso.Guarantees, "the engine runs rootless: no container process is root on the host")
	} else {
		iso.Missing = append(iso.Missing, "user namespace remapping is off on this engine (dockerd --userns-remap): "+
			"uid 0 in a container is uid 0 on the host should a kernel or runtime flaw let it out")
	}
	return iso
}

func orDefault(settings string) string {
	if settings == "" {
		return "its default profile"
	}
	return settings
}

// apiReach says whether containers can reach Slipway's own API. A bridge
// network's containers reach the host through their gateway, so a listen
// address other than loopback is reachable from them, as from any other
// network client (the API still wants a key); loopback is not.
func apiReach(addr string) (guarantee, missing string) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Sprintf("Slipway's listen address %q is not host:port; containers may reach its API", addr)
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsLoopback() {
		return fmt.Sprintf("Slipway's API listens on loopback (%s), which no container reaches; the admin socket never leaves the host's filesystem", addr), ""
	}
	return "", fmt.Sprintf("SLIPWAY_ADDR=%s is not a loopback address: containers reach Slipway's API through their network's gateway "+
		"like any other network client (it still wants a key); the admin socket never leaves the host's filesystem", addr)
}
