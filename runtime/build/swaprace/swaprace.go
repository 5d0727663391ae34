// Package swaprace is hostile deployment code for the containment tests:
// it races symbolic-link swaps against the files Slipway opens in a new
// revision's tree. For each target it makes a link to a place outside the
// tree (Slipway's data directory, say) and exchanges it atomically
// (renameat2 RENAME_EXCHANGE) with the file itself or a directory on its
// way, so that a path Slipway resolves afterwards leads outside. It can
// wait until the tree is handed to the deployment's uid and swap once, as
// a serving revision's code would, or swap back and forth from the moment
// the tree appears, which no deployment could do to a tree it cannot
// write yet (the tests run it as root to stand for the worst case).
//
// The process runtime's tests run it in a goroutine beside a build; the
// command graph testdata/graphs/swaprace runs it inside a serving
// revision's sandbox against the deployment's next revision.
package swaprace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Target is one file Slipway opens in the tree.
type Target struct {
	// File is the file, slash-separated, relative to the tree.
	File string `json:"file"`
	// Swap is what becomes a link: File itself or a directory on its
	// way ("conf" for "conf/app.env").
	Swap string `json:"swap"`
	// To is where the link leads (an absolute path outside the tree).
	To string `json:"to"`
}

// Options say when to swap.
type Options struct {
	// Owner: swap only once the tree's directory is owned by this uid
	// (the deployment's: the tree has been handed over); -1 swaps as
	// soon as the tree exists.
	Owner int
	// Files: swap only once every target's File is in the tree (the
	// unpacking is over, or nearly: what comes next reads them).
	Files bool
	// Toggle exchanges link and original again and again until the
	// context ends; otherwise each target is swapped once and left so.
	Toggle bool
	// Interval between toggles and between polls (default 200µs).
	Interval time.Duration
}

// Result says what happened to one target.
type Result struct {
	Target
	Swaps int    `json:"swaps"` // times the link was put in place
	Err   string `json:"err,omitempty"`
}

// Race waits for the tree (its directory, an absolute path) and races the
// swaps against whatever opens its files, until ctx ends; it reports per
// target. Seen reports whether the tree ever appeared (and was handed
// over, with Options.Owner).
func Race(ctx context.Context, tree string, targets []Target, opt Options) (results []Result, seen bool) {
	if opt.Interval <= 0 {
		opt.Interval = 200 * time.Microsecond
	}
	results = make([]Result, len(targets))
	for i, t := range targets {
		results[i].Target = t
	}
	for !ready(tree, targets, opt) {
		select {
		case <-ctx.Done():
			for i := range results {
				results[i].Err = "the tree never appeared (or was never handed over)"
			}
			return results, false
		case <-time.After(opt.Interval):
		}
	}
	links := make([]string, len(targets))
	for i, t := range targets {
		link, err := prepare(tree, t)
		if err != nil {
			results[i].Err = err.Error()
			continue
		}
		links[i] = link
	}
	for {
		for i, t := range targets {
			if links[i] == "" {
				continue
			}
			if opt.Toggle || results[i].Swaps == 0 {
				if err := exchange(tree, t.Swap, links[i]); err != nil {
					results[i].Err = err.Error()
					if !opt.Toggle {
						links[i] = ""
					}
					continue
				}
				if isLink(filepath.Join(tree, filepath.FromSlash(t.Swap))) {
					results[i].Swaps++
				}
				results[i].Err = ""
			}
		}
		select {
		case <-ctx.Done():
			return results, true
		case <-time.After(opt.Interval):
		}
	}
}

func ready(tree string, targets []Target, opt Options) bool {
	st, err := os.Lstat(tree)
	if err != nil || !st.IsDir() {
		return false
	}
	if opt.Files {
		for _, t := range targets {
			if _, err := os.Lstat(filepath.Join(tree, filepath.FromSlash(t.File))); err != nil {
				return false
			}
		}
	}
	if opt.Owner < 0 {
		return true
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && int(sys.Uid) == opt.Owner
}

// prepare makes the target's link beside what it replaces.
func prepare(tree string, t Target) (string, error) {
	if t.Swap == "" || t.To == "" || !strings.HasPrefix(t.File+"/", t.Swap+"/") {
		return "", fmt.Errorf("target %+v: Swap must be File or a directory on its way", t)
	}
	link := filepath.Join(tree, filepath.FromSlash(t.Swap)) + ".swaprace"
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return "", err
	}
	_ = os.Remove(link)
	if err := os.Symlink(t.To, link); err != nil {
		return "", err
	}
	return link, nil
}

// exchange swaps what is at rel with the link, atomically; with nothing
// at rel the link is moved there.
func exchange(tree, rel, link string) error {
	p := filepath.Join(tree, filepath.FromSlash(rel))
	for {
		err := unix.Renameat2(unix.AT_FDCWD, link, unix.AT_FDCWD, p, unix.RENAME_EXCHANGE)
		if err == nil {
			return nil
		}
		if errors.Is(err, unix.ENOENT) {
			if _, lerr := os.Lstat(p); errors.Is(lerr, os.ErrNotExist) {
				// Not there (yet): the link takes its place.
				if err := os.Rename(link, p); err != nil {
					return err
				}
				return nil
			}
			if _, lerr := os.Lstat(link); errors.Is(lerr, os.ErrNotExist) {
				return fmt.Errorf("%s: the link is gone", path.Base(link))
			}
		}
		if !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("exchange %s: %w", rel, err)
		}
	}
}

func isLink(p string) bool {
	st, err := os.Lstat(p)
	return err == nil && st.Mode()&os.ModeSymlink != 0
}

// Watch watches every directory under each of dirs with inotify and
// returns touched, which lists every open, read or listing in them since
// its last call (a directory's own listing as the directory's path). The
// watch ends with t.
func Watch(t interface {
	Helper()
	Fatal(...any)
	Cleanup(func())
}, dirs ...string) (touched func() []string) {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	names := map[int32]string{}
	for _, top := range dirs {
		err := filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			wd, err := unix.InotifyAddWatch(fd, p, unix.IN_OPEN|unix.IN_ACCESS)
			names[int32(wd)] = p
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return func() []string {
		var got []string
		buf := make([]byte, 64*1024)
		for {
			n, err := unix.Read(fd, buf)
			if n <= 0 || err != nil {
				return got
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				name := string(bytes.TrimRight(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)], "\x00"))
				got = append(got, filepath.Join(names[ev.Wd], name))
				off += unix.SizeofInotifyEvent + int(ev.Len)
			}
		}
	}
}
