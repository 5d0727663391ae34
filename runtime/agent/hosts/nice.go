package hosts

import (
	"fmt"
	"os/exec"
	"runtime"
	"syscall"
)

// MaxNice is the largest nice value Linux gives a process.
const MaxNice = 19

// startNiced starts cmd at nice values below Slipway's own (0: at its
// own) and returns a channel that receives cmd.Wait's result.
//
// Why: the host runs the graphs, the agent serves the API (admission,
// reads, health checks) and the checkpoint writes the host waits for.
// On a machine whose cores both want, the agent's short requests should
// not queue behind graph code: at a lower priority the host yields the
// CPU to them and takes what is left, which is most of it (BENCHMARKS.md,
// "The language host's priority").
//
// How: Linux keeps a nice value per thread, and a child starts with that
// of the thread that forked it. So the fork happens on a thread locked
// to a goroutine and set to the lower priority first; no other goroutine
// ever runs on it. The thread must outlive the child, since the
// child's parent-death signal (Pdeathsig) fires when the thread that
// started it ends: the same goroutine therefore waits for the child, and
// the thread ends with it.
//
// A system that refuses the priority change (a seccomp profile without
// setpriority) still gets its host, at Slipway's priority: niceErr says
// why, for the log.
func startNiced(cmd *exec.Cmd, nice int) (exited <-chan error, niceErr, err error) {
	waited := make(chan error, 1)
	if nice <= 0 {
		if err := cmd.Start(); err != nil {
			return nil, nil, err
		}
		go func() { waited <- cmd.Wait() }()
		return waited, nil, nil
	}
	started := make(chan error, 1)
	onSpareThread(func() {
		niceErr = setNice(nice)
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		waited <- cmd.Wait()
	})
	if err := <-started; err != nil {
		return nil, niceErr, err
	}
	return waited, niceErr, nil
}

// onSpareThread runs f in a goroutine locked to a thread that ends with
// it. Not the process's main thread: Go parks that one for good when its
// locked goroutine ends, instead of ending it. While one goroutine holds
// the main thread locked, no other can run there, so a goroutine that
// finds itself on it starts another and lets go once that one is locked.
func onSpareThread(f func()) {
	go func() {
		runtime.LockOSThread() // never unlocked on a spare thread: it ends with f
		if syscall.Gettid() != syscall.Getpid() {
			f()
			return
		}
		locked := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			close(locked)
			f()
		}()
		<-locked
		runtime.UnlockOSThread()
	}()
}

// setNice is setThreadNice; a test makes it fail.
var setNice = setThreadNice

// setThreadNice lowers the calling thread's priority by nice steps from
// its own, at most to MaxNice.
func setThreadNice(nice int) error {
	tid := syscall.Gettid()
	// The raw system call answers 20 - nice (1 to 40), never negative.
	raw, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid)
	if err != nil {
		return fmt.Errorf("read this thread's priority: %w", err)
	}
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, min(20-raw+nice, MaxNice)); err != nil {
		return fmt.Errorf("lower the host's priority by %d: %w", nice, err)
	}
	return nil
}
