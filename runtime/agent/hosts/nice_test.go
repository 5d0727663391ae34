package hosts

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"slipway/server/servertest"
)

// TestHostNice: a host started with Nice runs every one of its threads
// that many steps below Slipway's priority (at most MaxNice); of
// Slipway's threads only the one that started it and waits for it runs
// there, and it ends with the host; the host is not killed by its
// parent-death signal, which is tied to that thread.
func TestHostNice(t *testing.T) {
	own := uniqueNice(t, os.Getpid())
	for _, tc := range []struct{ nice, want int }{
		{0, own},
		{5, min(own+5, MaxNice)},
		{40, MaxNice},
	} {
		t.Run(strconv.Itoa(tc.nice), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			spec := Spec{Language: "fake", Argv: []string{os.Args[0], "-test.run=^$"}, Env: append(os.Environ(), fakeHostEnv+"=1"),
				ReadyTimeout: 30 * time.Second, Nice: tc.nice}
			h, _, err := Start(ctx, spec, &echoHandler{}, zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond)
			var nices []int
			if err := h.Call(ctx, "nice", nil, &nices); err != nil {
				t.Fatalf("the host, 200 ms after its start: %v", err)
			}
			for _, n := range nices {
				if n != tc.want {
					t.Fatalf("host threads at nice %v; want all %d", nices, tc.want)
				}
			}
			if got := othersAt(t, own); got != min(tc.nice, 1) {
				t.Fatalf("%d of Slipway's threads at another priority than its own while the host runs; want %d", got, min(tc.nice, 1))
			}
			cancel()
			for deadline := time.Now().Add(10 * time.Second); othersAt(t, own) > 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("a thread of Slipway's stayed at the host's priority after the host ended")
				}
			}
		})
	}
}

// TestHostNiceRefused: where the priority change is refused, the host
// still starts, at Slipway's priority, and the log says why.
func TestHostNiceRefused(t *testing.T) {
	setNice = func(int) error { return errors.New("setpriority: operation not permitted") }
	t.Cleanup(func() { setNice = setThreadNice })
	own := uniqueNice(t, os.Getpid())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var log servertest.SyncBuffer
	spec := Spec{Language: "fake", Argv: []string{os.Args[0], "-test.run=^$"}, Env: append(os.Environ(), fakeHostEnv+"=1"),
		ReadyTimeout: 30 * time.Second, Nice: 5}
	h, _, err := Start(ctx, spec, &echoHandler{}, zerolog.New(&log))
	if err != nil {
		t.Fatal(err)
	}
	var nices []int
	if err := h.Call(ctx, "nice", nil, &nices); err != nil {
		t.Fatal(err)
	}
	for _, n := range nices {
		if n != own {
			t.Fatalf("host threads at nice %v; want all %d", nices, own)
		}
	}
	if !strings.Contains(log.String(), "own CPU priority") || !strings.Contains(log.String(), "operation not permitted") {
		t.Fatalf("log: %s", log.String())
	}
}

// uniqueNice is the nice value all of process pid's threads share.
func uniqueNice(t *testing.T, pid int) int {
	t.Helper()
	nices, err := threadNices(pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nices[1:] {
		if n != nices[0] {
			t.Fatalf("threads of %d at nice %v", pid, nices)
		}
	}
	return nices[0]
}

// othersAt counts this process's threads whose nice value is not own.
func othersAt(t *testing.T, own int) int {
	t.Helper()
	nices, err := threadNices(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, v := range nices {
		if v != own {
			n++
		}
	}
	return n
}

// threadNices reads the nice value of each thread of process pid.
func threadNices(pid int) ([]int, error) {
	stats, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/stat")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		// Fields after the command's closing parenthesis start at the
		// state (the third); nice is the nineteenth.
		fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		n, err := strconv.Atoi(fields[16])
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}
