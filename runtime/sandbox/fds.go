package sandbox

import (
	"fmt"
	"slices"

	"golang.org/x/sys/unix"
)

// checkKeptFDs runs first in the launcher, before it opens anything: each
// descriptor the job names (Job.KeepFDs) must be one its caller passed
// (exec.Cmd.ExtraFiles), and a pipe. A number nobody passed could
// otherwise be taken by a file the launcher opens itself (the target, a
// directory it mounts from) and cross into the job.
func checkKeptFDs(keep []int) error {
	for _, fd := range keep {
		if fd < 3 {
			return fmt.Errorf("file descriptor %d: stdin, stdout and stderr are always kept", fd)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return fmt.Errorf("file descriptor %d was not passed: %w", fd, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFIFO {
			return fmt.Errorf("file descriptor %d is not a pipe", fd)
		}
	}
	return nil
}

// closeExtraFDs marks every descriptor from 3 up close-on-exec but those
// in keep, which it makes inheritable: nothing but stdin, stdout, stderr
// and the named pipes crosses into the job.
func closeExtraFDs(keep []int) error {
	keep = slices.Clone(keep)
	slices.Sort(keep)
	lo := uint(3)
	for _, fd := range keep {
		if uint(fd) > lo {
			if err := unix.CloseRange(lo, uint(fd)-1, unix.CLOSE_RANGE_CLOEXEC); err != nil {
				return fmt.Errorf("close file descriptors: %w", err)
			}
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
			return fmt.Errorf("keep file descriptor %d: %w", fd, err)
		}
		lo = uint(fd) + 1
	}
	if err := unix.CloseRange(lo, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("close file descriptors: %w", err)
	}
	return nil
}
