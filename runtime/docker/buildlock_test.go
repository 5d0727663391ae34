package docker

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// buildEngine is an engine whose official images are there and whose
// builds of tags with a gated prefix block until the gate opens. Every
// build start is recorded in order.
type buildEngine struct {
	Engine
	mu      sync.Mutex
	images  map[string]bool
	started []string
	startCh chan string
	gates   map[string]chan struct{} // tag prefix → closed when builds may finish
}

func (e *buildEngine) ImageInspect(_ context.Context, ref string, _ ...client.ImageInspectOption) (client.ImageInspectResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.images[ref] {
		var r client.ImageInspectResult
		r.ID = "sha256:" + ref
		return r, nil
	}
	return client.ImageInspectResult{}, cerrdefs.ErrNotFound
}

func (e *buildEngine) ImageBuild(ctx context.Context, _ io.Reader, o client.ImageBuildOptions) (client.ImageBuildResult, error) {
	tag := o.Tags[0]
	e.mu.Lock()
	e.started = append(e.started, tag)
	var gate chan struct{}
	for p, g := range e.gates {
		if strings.HasPrefix(tag, p) {
			gate = g
		}
	}
	e.mu.Unlock()
	e.startCh <- tag
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return client.ImageBuildResult{}, ctx.Err()
		}
	}
	e.mu.Lock()
	e.images[tag] = true
	e.mu.Unlock()
	return client.ImageBuildResult{Body: io.NopCloser(strings.NewReader(""))}, nil
}

// logSink is a build log that can be waited on for a line.
type logSink struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newLogSink() *logSink { return &logSink{changed: make(chan struct{}, 1)} }

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
	return l.buf.Write(p)
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// waitFor waits for s in the log; the bound only ends a test that would
// otherwise hang on a build that never gets there.
func (l *logSink) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for !strings.Contains(l.String(), s) {
		select {
		case <-l.changed:
		case <-deadline:
			t.Fatalf("the log never said %q; it says:\n%s", s, l.String())
		}
	}
}

// staticELF writes an ELF header without an interpreter: CheckStatic takes
// it for a static binary.
func staticELF(t *testing.T) string {
	t.Helper()
	h := elf.Header64{Type: uint16(elf.ET_EXEC), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT), Ehsize: 64, Phentsize: 56, Shentsize: 64}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS], h.Ident[elf.EI_DATA], h.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	var buf bytes.Buffer
	if err := binary.Write(&buf, binary.LittleEndian, h); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "slipway")
	if err := os.WriteFile(p, buf.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := CheckStatic(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBuildsOfDifferentImagesDoNotWait: while one deployment builds the
// Node.js 20 agent image, another's Python image builds at once; a third
// that needs Node.js 20 too says in its own log that it waits and for
// whom, waits, says how long, and reuses the image instead of building it
// again.
func TestBuildsOfDifferentImagesDoNotWait(t *testing.T) {
	release := make(chan struct{})
	e := &buildEngine{
		images:  map[string]bool{"python:3.11-slim": true, "node:20-slim": true},
		startCh: make(chan string, 16),
		gates:   map[string]chan struct{}{"slipway-node:20-": release},
	}
	d := &Driver{Client: e, Bin: staticELF(t), Instance: "i1", ImageCache: t.TempDir(), PythonBaseImage: "python:{version}-slim", NodeBaseImage: "node:{version}-slim"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	defer open()

	type result struct {
		tag string
		err error
	}
	aLog, bLog, cLog := newLogSink(), newLogSink(), newLogSink()
	aDone, bDone, cDone := make(chan result, 1), make(chan result, 1), make(chan result, 1)
	go func() {
		tag, err := d.NodeImage(withDeployment(ctx, "ws1", "alpha"), "20", aLog)
		aDone <- result{tag, err}
	}()
	if tag := <-e.startCh; !strings.HasPrefix(tag, "slipway-node:20-") {
		t.Fatalf("first build is %s", tag)
	}

	// A different base: built while alpha's build holds Node.js 20.
	go func() {
		tag, err := d.PythonImage(withDeployment(ctx, "ws1", "beta"), "3.11", bLog)
		bDone <- result{tag, err}
	}()
	select {
	case r := <-bDone:
		if r.err != nil || !strings.HasPrefix(r.tag, "slipway-python:3.11-") {
			t.Fatalf("python build = %q, %v", r.tag, r.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the Python image waited for the Node.js build; its log:\n%s", bLog.String())
	}
	if strings.Contains(bLog.String(), "waiting") {
		t.Fatalf("the Python build waited:\n%s", bLog.String())
	}

	// The same base: waits for alpha's build, saying so.
	go func() {
		tag, err := d.NodeImage(withDeployment(ctx, "ws1", "gamma"), "20", cLog)
		cDone <- result{tag, err}
	}()
	waiting := "waiting for the build of slipway-node:20 (deployment alpha) to finish"
	cLog.waitFor(t, waiting)
	if strings.Contains(cLog.String(), "waited") {
		t.Fatalf("gamma's log says it is done waiting before alpha's build ended:\n%s", cLog.String())
	}
	open()
	a, c := <-aDone, <-cDone
	if a.err != nil || c.err != nil {
		t.Fatalf("builds: %v, %v", a.err, c.err)
	}
	if a.tag != c.tag {
		t.Fatalf("alpha built %s, gamma got %s", a.tag, c.tag)
	}
	out := cLog.String()
	w, done := strings.Index(out, waiting), strings.Index(out, "waited ")
	if done < 0 || done < w || !strings.Contains(out[done:], " for the build of slipway-node:20\n") {
		t.Fatalf("gamma's log does not say how long it waited, after waiting:\n%s", out)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var node int
	for _, s := range e.started {
		if strings.HasPrefix(s, "slipway-node:20-") {
			node++
		}
	}
	if node != 1 {
		t.Fatalf("Node.js 20 image built %d times: %v", node, e.started)
	}
}

// TestBuildLockWaitEndsWithTheContext: a build whose deployment is deleted
// (its context cancelled) while it waits stops waiting, says so, and the
// holder's lock is untouched; other images' locks are free meanwhile.
func TestBuildLockWaitEndsWithTheContext(t *testing.T) {
	var b buildLocks
	unlock, err := b.lock(withDeployment(context.Background(), "ws1", "alpha"), "slipway-deps:1", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	other, err := b.lock(context.Background(), "slipway-deps:2", io.Discard)
	if err != nil {
		t.Fatalf("another dependencies image: %v", err)
	}
	other()
	ctx, cancel := context.WithCancel(context.Background())
	log := newLogSink()
	errc := make(chan error, 1)
	go func() {
		_, err := b.lock(withDeployment(ctx, "ws1", "beta"), "slipway-deps:1", log)
		errc <- err
	}()
	log.waitFor(t, "waiting for the build of slipway-deps:1 (deployment alpha) to finish")
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("wait = %v", err)
	}
	log.waitFor(t, "gave up waiting for the build of slipway-deps:1")
	unlock()
	again, err := b.lock(context.Background(), "slipway-deps:1", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	again()
}

// TestBuildWaitNamesTheHolder: the waiting line names the deployment that
// holds the image only to a build of the same workspace; another
// workspace's deployment stays unnamed, as everything of it.
func TestBuildWaitNamesTheHolder(t *testing.T) {
	tests := []struct {
		name   string
		holder context.Context
		waiter context.Context
		want   string
	}{
		{"same workspace", withDeployment(context.Background(), "ws1", "alpha"), withDeployment(context.Background(), "ws1", "beta"), "(deployment alpha)"},
		{"another workspace", withDeployment(context.Background(), "ws1", "alpha"), withDeployment(context.Background(), "ws2", "beta"), "(a deployment of another workspace)"},
		{"a command", WithBuilder(context.Background(), "slipway images"), withDeployment(context.Background(), "ws2", "beta"), "(slipway images)"},
		{"unnamed", context.Background(), withDeployment(context.Background(), "ws2", "beta"), "(another build)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b buildLocks
			unlock, err := b.lock(tt.holder, "slipway-node:20", io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			log := newLogSink()
			done := make(chan error, 1)
			go func() {
				release, err := b.lock(tt.waiter, "slipway-node:20", log)
				if err == nil {
					release()
				}
				done <- err
			}()
			log.waitFor(t, "waiting for the build of slipway-node:20 "+tt.want+" to finish\n")
			unlock()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if out := log.String(); strings.Contains(tt.want, "another workspace") && strings.Contains(out, "alpha") {
				t.Fatalf("another workspace's deployment named: %s", out)
			}
		})
	}
}
