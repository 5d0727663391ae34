package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// logs: slipway logs NAME [-f] [--build|--deploy|--agent] [--revision R].
// Without --revision it reads the latest revision (the one a deploy just
// made). -f follows the build, the deploy and the agent's output, moving
// on to each newer revision, until interrupted; with --build or --deploy
// it ends when the revision's status is final; --agent -f follows the
// revision's agent output until interrupted.
func (a *app) logs(ctx context.Context, args []string) error {
	fs := a.flags("logs", "NAME [-f] [--build|--deploy|--agent] [--revision R]")
	follow := fs.Bool("f", false, "follow: print new lines as they are written")
	fs.BoolVar(follow, "follow", false, "same as -f")
	build := fs.Bool("build", false, "only build lines")
	deploy := fs.Bool("deploy", false, "only deploy lines")
	agent := fs.Bool("agent", false, "only the agent's own output")
	revRef := fs.String("revision", "", "revision id or prefix (default: the latest)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	name, err := a.oneName("logs", pos)
	if err != nil {
		return err
	}
	phase, n := "", 0
	for p, on := range map[string]bool{"build": *build, "deploy": *deploy, "agent": *agent} {
		if on {
			phase, n = p, n+1
		}
	}
	if n > 1 {
		return fail(ExitUsage, "--build, --deploy and --agent exclude each other")
	}
	if err := a.connect(); err != nil {
		return err
	}
	d, err := a.need(ctx, name)
	if err != nil {
		return err
	}
	rev := deref(d.LatestRevisionID, deref(d.ActiveRevisionID, ""))
	if *revRef != "" {
		revs, err := a.client.Revisions(ctx, d.ID)
		if err != nil {
			return err
		}
		r, err := findRevision(revs, *revRef)
		if err != nil {
			return err
		}
		rev = r.ID
	}
	if rev == "" {
		return fail(ExitNotFound, "deployment %s has no revision yet", d.Name)
	}
	printed := 0
	enc := json.NewEncoder(a.env.Stdout)
	emit := func(e LogEntry) {
		if phase != "" && e.Phase != phase {
			return
		}
		printed++
		if a.jsonOut {
			_ = enc.Encode(e) // JSON Lines, one entry each
			return
		}
		fmt.Fprintf(a.env.Stdout, "%s %-6s %s\n", e.Timestamp.Local().Format("15:04:05"), e.Phase, strings.TrimRight(e.Message, "\n"))
	}
	var status string
	if *follow {
		switch phase {
		case "":
			// Everything: the build, the deploy, the agent's output, and
			// the next revision's, until interrupted.
			status, err = a.followDeployment(ctx, d.ID, rev, emit)
		default:
			status, err = LogFollower(&Streamer{Client: a.client}).Follow(ctx, d.ID, rev, FollowOptions{Entry: emit, Forever: phase == "agent"})
		}
	} else {
		var entries []LogEntry
		entries, status, err = a.client.RevisionLogs(ctx, d.ID, rev)
		for _, e := range entries {
			emit(e)
		}
	}
	if err != nil {
		return err
	}
	if printed == 0 && !a.jsonOut {
		what := "lines"
		if phase != "" {
			what = phase + " lines"
		}
		fmt.Fprintf(a.env.Stderr, "no %s in the log of revision %s (%s)\n", what, short(rev), status)
	}
	return nil
}
