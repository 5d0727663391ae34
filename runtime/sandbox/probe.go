package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// probeUID is who the start-up probe drops to: nobody, which owns nothing.
const probeUID = 65534

// Probe finds the strongest mode this host allows, by running the launcher
// (bin) once in it with deployDir, an existing directory inside dataDir.
// It returns the mode, the kernel's Landlock ABI (0: none) and, for the
// operator, why a stronger mode did not work.
func Probe(bin, dataDir, deployDir string) (mode Mode, landlockABI int, notes []string) {
	if v, err := llsys.LandlockGetABIVersion(); err == nil {
		landlockABI = v
	}
	try := func(m Mode) error {
		l := &Launcher{Bin: bin, Mode: m}
		cmd, err := l.Command(context.Background(), Job{DataDir: dataDir, DeployDir: deployDir, UID: probeUID, GID: probeUID, Probe: true})
		if err != nil {
			return err
		}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			return err
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			err = <-done
		}
		if err != nil {
			return fmt.Errorf("%w: %s", err, strings.TrimSpace(out.String()))
		}
		return nil
	}
	if os.Geteuid() == 0 {
		if err := try(ModeNamespaces); err != nil {
			notes = append(notes, "mount/PID/IPC namespaces failed ("+err.Error()+"): falling back to uid separation with Landlock")
		} else {
			return ModeNamespaces, landlockABI, notes
		}
		if err := try(ModeUID); err != nil {
			notes = append(notes, "dropping to a deployment uid failed ("+err.Error()+")")
		} else {
			return ModeUID, landlockABI, notes
		}
	} else if err := try(ModeUserNamespaces); err != nil {
		notes = append(notes, "unprivileged user namespaces failed ("+err.Error()+"): the data directory is hidden by Landlock alone")
	} else {
		return ModeUserNamespaces, landlockABI, notes
	}
	if landlockABI > 0 {
		if err := try(ModeLandlock); err == nil {
			return ModeLandlock, landlockABI, notes
		} else {
			notes = append(notes, "Landlock failed: "+err.Error())
		}
	}
	return ModeNone, landlockABI, notes
}
