package process

import (
	"fmt"

	"slipway/runtime"
	"slipway/runtime/sandbox"
)

// Limits are what a deployment gets when its resource_spec does not say
// (memory_limit_mb, cpu_limit), and the cap on its processes, which
// resource_spec has no field for. Zero means no limit.
type Limits struct {
	MemoryMB int     // SLIPWAY_DEFAULT_MEMORY_LIMIT_MB
	CPUs     float64 // SLIPWAY_DEFAULT_CPU_LIMIT
	PIDs     int     // SLIPWAY_PIDS_LIMIT
}

// initLimits sets up the deployments' cgroups (sandbox.SetupCgroups) and
// says in the isolation report whether limits hold. Deployment code that
// shares Slipway's uid with nothing (no Landlock) to stop it writing to
// its cgroup's files could move itself out: limits are then reported as
// not guaranteed.
func (d *Driver) initLimits(iso *runtime.Isolation, mode sandbox.Mode, landlockABI int) {
	cg, err := sandbox.SetupCgroups(d.DataDir)
	if err != nil {
		iso.Missing = append(iso.Missing, "no resource limits: a deployment can use all of the host's memory, processes and CPU ("+err.Error()+")")
		return
	}
	d.cgroups = cg
	what := fmt.Sprintf("resource limits per deployment (%s): memory_limit_mb, else %s, without swap; %s; cpu_limit, else %s",
		cg.Describe(), orNone(d.Limits.MemoryMB, "%d MiB"), orNone(d.Limits.PIDs, "at most %d processes and threads"),
		orNoneF(d.Limits.CPUs, "%g cores"))
	if !cg.Has("cpu") {
		what += " (no cpu controller: CPU is not limited)"
	}
	what += "; a fork bomb or memory hog is stopped inside its own cgroup, and removing a deployment kills whatever it left running"
	if !mode.Privileged() && (mode == sandbox.ModeNone || landlockABI == 0) {
		iso.Missing = append(iso.Missing, what+", but deployments share Slipway's uid and nothing stops them writing their cgroup's files: the limits can be escaped")
		return
	}
	iso.Guarantees = append(iso.Guarantees, what)
}

func orNone(n int, format string) string {
	if n <= 0 {
		return "no limit"
	}
	return fmt.Sprintf(format, n)
}

func orNoneF(n float64, format string) string {
	if n <= 0 {
		return "no limit"
	}
	return fmt.Sprintf(format, n)
}

// cgroupLimits are the revision's limits: its resource_spec, else the
// driver's defaults.
func (d *Driver) cgroupLimits(s runtime.Spec) sandbox.CgroupLimits {
	l := sandbox.CgroupLimits{MemoryBytes: int64(d.Limits.MemoryMB) << 20, PIDs: int64(d.Limits.PIDs), CPUs: d.Limits.CPUs}
	if rs := s.ResourceSpec; rs != nil {
		if rs.MemoryLimitMB != nil {
			l.MemoryBytes = int64(*rs.MemoryLimitMB) << 20
		}
		if rs.MemoryMB != nil {
			l.MemoryLowBytes = int64(*rs.MemoryMB) << 20
			// A request above the default limit raises it: the control
			// plane derives memory_limit_mb from memory_mb when only that
			// is given, so this is a spec written by hand.
			if rs.MemoryLimitMB == nil && l.MemoryBytes > 0 && l.MemoryBytes < l.MemoryLowBytes {
				l.MemoryBytes = l.MemoryLowBytes
			}
		}
		if rs.CPULimit != nil {
			l.CPUs = *rs.CPULimit
		}
		if rs.CPU != nil {
			l.CPUWeightCores = *rs.CPU
		}
	}
	return l
}

// applyLimits puts the revision's limits on the deployment's cgroup. A
// build (update false) only creates a missing cgroup: the serving revision
// runs in it meanwhile, and a lower memory limit could fail or kill it;
// the new limits take over when the revision starts.
func (d *Driver) applyLimits(s runtime.Spec, update bool) error {
	if d.cgroups == nil {
		return nil
	}
	if !update && d.cgroups.Exists(s.DeploymentID) {
		return nil
	}
	if err := d.cgroups.Apply(s.DeploymentID, d.cgroupLimits(s)); err != nil {
		return fmt.Errorf("resource limits: %w", err)
	}
	return nil
}

// release ends whatever the deployment still runs and removes its
// cgroup; with no mount namespace it also removes what the deployment's
// uid left in the host's shared temporary directories. Before the uid is
// freed.
func (d *Driver) release(dep string) error {
	if err := d.cgroups.Remove(dep); err != nil {
		return fmt.Errorf("remove deployment: %w", err)
	}
	if d.uids == nil || d.sandbox.Mode == sandbox.ModeNamespaces {
		return nil
	}
	uid, ok := d.uids.lookup(dep)
	if !ok {
		return nil
	}
	if err := sandbox.PurgeOwned(sandbox.SharedTempDirs, uid); err != nil {
		// Not fatal: the uid stays in quarantine while it owns a file.
		d.Log.Warn().Err(err).Str("deployment_id", dep).Msg("could not remove all the files the deployment left in shared temporary directories")
	}
	return nil
}

// uidInUse is the uid table's quarantine check: a uid that still runs a
// process, or (with no mount namespace) owns a file in the host's shared
// temporary directories, is not handed out.
func (d *Driver) uidInUse(uid int) (bool, error) {
	var dirs []string
	if d.sandbox.Mode != sandbox.ModeNamespaces {
		dirs = sandbox.SharedTempDirs
	}
	return sandbox.OwnsFiles(dirs, uid)
}
