package docker

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// buildLocks serialises builds of the same image only: two builds of one
// language image (or one dependencies image, or one root filesystem)
// would do the same work twice and race on the tag, but builds of
// different images have nothing to share. One lock for all of them made a
// code-only redeploy wait minutes behind another deployment's Node.js
// base image, saying nothing.
type buildLocks struct {
	mu   sync.Mutex
	held map[string]*buildHold // image → the build holding it
}

type buildHold struct {
	owner builder       // who builds it, for the waiting line
	done  chan struct{} // closed when it lets go
}

// builder is who builds: a deployment of a workspace, or a command.
type builder struct{ workspace, name string }

// builderKey carries, in a build's context, who builds: the waiting line
// of another build names it.
type builderKey struct{}

// WithBuilder returns ctx naming who builds under it: a command
// ("slipway images").
func WithBuilder(ctx context.Context, who string) context.Context {
	return context.WithValue(ctx, builderKey{}, builder{name: who})
}

// withDeployment returns ctx naming the deployment that builds under it.
func withDeployment(ctx context.Context, workspace, name string) context.Context {
	return context.WithValue(ctx, builderKey{}, builder{workspace: workspace, name: "deployment " + name})
}

func builderOf(ctx context.Context) builder {
	b, _ := ctx.Value(builderKey{}).(builder)
	return b
}

// describe names the holder to a build of waiter: a deployment of
// another workspace stays unnamed, as everything of another workspace.
func (h builder) describe(waiter builder) string {
	switch {
	case h.name == "":
		return "another build"
	case h.workspace != "" && h.workspace != waiter.workspace:
		return "a deployment of another workspace"
	}
	return h.name
}

// lock takes image's lock for the build in ctx. When another build holds
// it, the wait is announced in this build's log — which image, who holds
// it — and, once over, how long it took. The returned func lets go; a
// caller must not take the same image twice.
func (b *buildLocks) lock(ctx context.Context, image string, log io.Writer) (func(), error) {
	var start time.Time
	for {
		b.mu.Lock()
		h := b.held[image]
		if h == nil {
			if b.held == nil {
				b.held = map[string]*buildHold{}
			}
			mine := &buildHold{owner: builderOf(ctx), done: make(chan struct{})}
			b.held[image] = mine
			b.mu.Unlock()
			if !start.IsZero() {
				fmt.Fprintf(log, "waited %s for the build of %s\n", time.Since(start).Round(time.Millisecond), image)
			}
			return func() {
				b.mu.Lock()
				delete(b.held, image)
				b.mu.Unlock()
				close(mine.done)
			}, nil
		}
		b.mu.Unlock()
		if start.IsZero() {
			start = time.Now()
			fmt.Fprintf(log, "waiting for the build of %s (%s) to finish\n", image, h.owner.describe(builderOf(ctx)))
		}
		select {
		case <-h.done:
		case <-ctx.Done():
			fmt.Fprintf(log, "gave up waiting for the build of %s after %s\n", image, time.Since(start).Round(time.Millisecond))
			return nil, fmt.Errorf("wait for the build of %s: %w", image, ctx.Err())
		}
	}
}
