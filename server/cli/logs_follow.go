package cli

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// lastIDs are the ids of the last build/deploy line and the last agent
// line of a revision's log: the two series are numbered apart.
func lastIDs(entries []LogEntry) (rev, agent int64) {
	for _, e := range entries {
		if e.Phase == "agent" {
			agent = max(agent, e.ID)
		} else {
			rev = max(rev, e.ID)
		}
	}
	return rev, agent
}

// switchPoll is how often a whole-deployment follow looks for a newer
// revision (a deploy, a rollback) to move on to.
const switchPoll = time.Second

// followDeployment is `slipway logs NAME -f`: the build, the deploy and
// then the agent's output of rev, and whenever the deployment moves on to
// another revision (a deploy, a rollback), that one's, until ctx ends or
// the deployment is deleted. Of a revision moved on to, only the lines
// written after the last build or deploy line printed are shown: a rolled
// back revision's log holds its first build, which is history, not what
// happens now.
func (a *app) followDeployment(ctx context.Context, depID, rev string, emit func(LogEntry)) (string, error) {
	var mark, floor time.Time // last build/deploy line printed; lines at or before floor are skipped
	first := true
	for {
		rctx, cancel := context.WithCancel(ctx)
		moved := make(chan string, 1)
		go func() {
			// A newer revision ends this one's follow: its build is what
			// the user wants to see next.
			t := time.NewTicker(switchPoll)
			defer t.Stop()
			for {
				select {
				case <-rctx.Done():
					return
				case <-t.C:
				}
				if d, err := a.client.Deployment(rctx, depID); err == nil {
					if next := deref(d.LatestRevisionID, rev); next != rev {
						moved <- next
						cancel()
						return
					}
				}
			}
		}()
		status, err := LogFollower(&Streamer{Client: a.client}).Follow(rctx, depID, rev, FollowOptions{Forever: true,
			Entry: func(e LogEntry) {
				if !first && !e.Timestamp.After(floor) {
					return
				}
				if e.Phase != "agent" && e.Timestamp.After(mark) {
					mark = e.Timestamp
				}
				emit(e)
			}})
		cancel()
		if ctx.Err() != nil {
			return status, ctx.Err()
		}
		var next string
		select {
		case next = <-moved:
		default:
			if err != nil && !errors.Is(err, context.Canceled) {
				return status, err
			}
			if status == "DELETED" {
				return status, nil
			}
			// The revision is over and serves no more, and no newer one
			// was seen yet: wait for one.
			if next, err = a.nextRevision(ctx, depID, rev); err != nil {
				return status, err
			}
		}
		fmt.Fprintf(a.env.Stderr, "-- following revision %s --\n", short(next))
		rev, first, floor = next, false, mark
	}
}

// nextRevision waits until the deployment's latest revision is another
// than rev and returns it.
func (a *app) nextRevision(ctx context.Context, depID, rev string) (string, error) {
	for {
		d, err := a.client.Deployment(ctx, depID)
		if err != nil {
			return "", err
		}
		if next := deref(d.LatestRevisionID, rev); next != rev {
			return next, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(switchPoll):
		}
	}
}
