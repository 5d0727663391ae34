package docker

import (
	"github.com/moby/moby/api/types/container"
)

// Every container the driver creates runs deployment code: the agent, and
// the init containers and sidecars a resource_spec names. None of them needs
// a capability (the agent listens on port 8000, and Docker 20.10 and later
// let an unprivileged process bind any port inside its own network
// namespace), so all are dropped; what deployment code may do is what its
// uid may do inside its own namespaces, and nothing of the host is mounted.
const (
	// pidsLimit bounds the processes and threads of one container, so that
	// a fork bomb in a command graph stays inside its deployment. The agent
	// runs at most SLIPWAY_AGENT_WORKERS command graphs at a time, each a
	// process with a few threads; Go itself needs a few dozen threads.
	pidsLimit = 1024
	// tmpfsOptions is the agent's /tmp when its root filesystem is read
	// only: HOME and TMPDIR point there. It belongs to the agent's user:
	// the engine copies the image's /tmp into it and leaves its root owned
	// by root otherwise, which the agent could not write. nodev and nosuid
	// keep a device node or a set-uid file written there from meaning
	// anything; its size counts against the container's memory limit.
	tmpfsOptions = "rw,nosuid,nodev,size=256m,uid=" + agentID + ",gid=" + agentID + ",mode=1777"
)

// harden applies what holds for every container of a deployment: no
// capability, no privilege gained through exec (set-uid files, file
// capabilities), never privileged, its own PID, IPC, UTS and cgroup
// namespaces (the network is set by the caller: the deployment's own
// network, or the agent's for a sidecar), no device, and a process limit.
// Mounts are set by the caller and are only Docker volumes (see makePlan):
// never a bind mount of a host path. readOnly makes the root filesystem
// read only, with a tmpfs on /tmp.
func harden(hc *container.HostConfig, readOnly bool) *container.HostConfig {
	hc.CapAdd = nil
	hc.CapDrop = []string{"ALL"}
	hc.SecurityOpt = []string{"no-new-privileges"}
	hc.Privileged = false
	// Empty modes are the engine's defaults, which differ between engine
	// versions and daemon settings: name the private ones explicitly.
	hc.PidMode = ""
	hc.IpcMode = container.IPCModePrivate
	hc.UTSMode = ""
	hc.CgroupnsMode = container.CgroupnsModePrivate
	hc.Binds = nil
	hc.VolumesFrom = nil
	hc.Devices = nil
	hc.DeviceCgroupRules = nil
	hc.DeviceRequests = nil
	limit := int64(pidsLimit)
	hc.PidsLimit = &limit
	hc.ReadonlyRootfs = readOnly
	if readOnly {
		hc.Tmpfs = map[string]string{"/tmp": tmpfsOptions}
	}
	return hc
}
