package docker

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCacheDirLockExcludes takes the cache lock of a directory twice, as
// two processes building the same root filesystem would (each open of the
// lock file is its own flock holder): the second waits, says so, and gets
// the lock once the first lets go.
func TestCacheDirLockExcludes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache", "rootfs-bookworm-abc")
	unlock, err := lockCacheDir(context.Background(), dir, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := lockCacheDir(ctx, dir, &log); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second holder got the lock while the first held it: %v", err)
	}
	if !strings.Contains(log.String(), "waiting for another Slipway process building rootfs-bookworm-abc") {
		t.Fatalf("the wait was not logged: %q", log.String())
	}
	done := make(chan error, 1)
	go func() {
		u, err := lockCacheDir(context.Background(), dir, &bytes.Buffer{})
		if err == nil {
			u()
		}
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	unlock()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting holder never got the lock after the first let go")
	}
}
