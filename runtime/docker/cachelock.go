package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// lockCacheDir takes an exclusive lock on dir of the shared image cache
// (its root filesystems), across processes: the in-process build locks are
// per install, and every install on the host (and every test binary) uses
// the one cache, where two debootstraps of a suite into the same directory
// would ruin each other's tree. The lock is a flock on dir+".lock", released
// by the returned function (or by the process's end). A wait says so in log.
func lockCacheDir(ctx context.Context, dir string, log io.Writer) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, fmt.Errorf("image cache: %w", err)
	}
	f, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("image cache lock: %w", err)
	}
	start := time.Now()
	for waited := false; ; {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			if waited {
				fmt.Fprintf(log, "<== %s is free after %s\n", filepath.Base(dir), time.Since(start).Round(time.Millisecond))
			}
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("image cache lock: %w", err)
		}
		if !waited {
			waited = true
			fmt.Fprintf(log, "==> waiting for another Slipway process building %s in the image cache\n", filepath.Base(dir))
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
