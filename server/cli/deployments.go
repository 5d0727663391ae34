package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// need returns the deployment named (or with the id) nameOrID.
func (a *app) need(ctx context.Context, nameOrID string) (*Deployment, error) {
	d, err := a.client.FindDeployment(ctx, nameOrID)
	if err != nil {
		return nil, err
	}
	if d == nil {
		return nil, fail(ExitNotFound, "no deployment is named %q in this workspace (slipway ls lists them)", nameOrID)
	}
	return d, nil
}

// oneName parses a command that takes exactly one NAME.
func (a *app) oneName(cmd string, pos []string) (string, error) {
	if len(pos) != 1 {
		return "", fail(ExitUsage, "%s takes one deployment name or id (see slipway %s -h)", cmd, cmd)
	}
	return pos[0], nil
}

// theDeployment is the one deployment a command names: its flags and arguments
// parsed and checked, then the server asked.
func (a *app) theDeployment(ctx context.Context, cmd string, fs *flag.FlagSet, args []string) (*Deployment, error) {
	pos, err := parse(fs, args)
	if err != nil {
		return nil, err
	}
	name, err := a.oneName(cmd, pos)
	if err != nil {
		return nil, err
	}
	if err := a.connect(); err != nil {
		return nil, err
	}
	return a.need(ctx, name)
}

// findRevision resolves a revision id, or an unambiguous prefix or suffix
// of one (the tables print the last 8 characters), among the deployment's
// revisions.
func findRevision(revs []Revision, ref string) (*Revision, error) {
	var match []*Revision
	for i := range revs {
		if revs[i].ID == ref {
			return &revs[i], nil
		}
		if len(ref) >= 4 && (strings.HasPrefix(revs[i].ID, ref) || strings.HasSuffix(revs[i].ID, ref)) {
			match = append(match, &revs[i])
		}
	}
	switch len(match) {
	case 1:
		return match[0], nil
	case 0:
		return nil, fail(ExitNotFound, "the deployment has no revision %q (slipway revisions lists them)", ref)
	}
	return nil, fail(ExitUsage, "revision %q is ambiguous: it matches %d revisions", ref, len(match))
}

func raws[T any](items []T, raw func(T) json.RawMessage) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(items))
	for _, it := range items {
		out = append(out, raw(it))
	}
	return out
}

// list: slipway ls — the workspace's deployments.
func (a *app) list(ctx context.Context, args []string) error {
	fs := a.flags("ls", "[--json]")
	if pos, err := parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return fail(ExitUsage, "ls takes no arguments")
	}
	if err := a.connect(); err != nil {
		return err
	}
	deps, err := a.client.Deployments(ctx, "")
	if err != nil {
		return err
	}
	if a.jsonOut {
		return a.printJSON(raws(deps, func(d Deployment) json.RawMessage { return d.Raw }))
	}
	if len(deps) == 0 {
		fmt.Fprintln(a.env.Stdout, "No deployments yet: slipway deploy ./my-agent")
		return nil
	}
	rows := make([][]string, 0, len(deps))
	for _, d := range deps {
		rows = append(rows, []string{d.Name, d.Status, short(deref(d.ActiveRevisionID, "-")), ago(d.UpdatedAt), deref(d.URL, "-")})
	}
	a.table([]string{"NAME", "STATUS", "ACTIVE", "UPDATED", "URL"}, rows)
	return nil
}

// status: slipway status NAME — one deployment and its latest revision.
func (a *app) status(ctx context.Context, args []string) error {
	fs := a.flags("status", "NAME [--json]")
	d, err := a.theDeployment(ctx, "status", fs, args)
	if err != nil {
		return err
	}
	if a.jsonOut {
		return a.printJSON(d.Raw)
	}
	revStatus := func(id *string) string {
		if id == nil {
			return "-"
		}
		r, err := a.client.Revision(ctx, d.ID, *id)
		if err != nil {
			return *id
		}
		return fmt.Sprintf("%s (%s, %s)", *id, r.Status, ago(r.UpdatedAt))
	}
	secrets := make([]string, 0, len(d.Secrets))
	for _, s := range d.Secrets {
		secrets = append(secrets, s.Name)
	}
	rows := [][]string{
		{"name:", d.Name}, {"id:", d.ID}, {"status:", d.Status}, {"url:", deref(d.URL, "-")},
		{"source:", d.Source},
		{"active revision:", revStatus(d.ActiveRevisionID)},
		{"latest revision:", revStatus(d.LatestRevisionID)},
		{"secrets:", strings.Join(secrets, ", ")},
		{"created:", d.CreatedAt.Local().Format(time.RFC3339)},
		{"updated:", d.UpdatedAt.Local().Format(time.RFC3339)},
	}
	for _, r := range rows {
		fmt.Fprintf(a.env.Stdout, "%-17s %s\n", r[0], r[1])
	}
	return nil
}

// revisions: slipway revisions NAME — newest first; * marks the one serving.
func (a *app) revisions(ctx context.Context, args []string) error {
	fs := a.flags("revisions", "NAME [--json]")
	d, err := a.theDeployment(ctx, "revisions", fs, args)
	if err != nil {
		return err
	}
	revs, err := a.client.Revisions(ctx, d.ID)
	if err != nil {
		return err
	}
	if a.jsonOut {
		return a.printJSON(raws(revs, func(r Revision) json.RawMessage { return r.Raw }))
	}
	rows := make([][]string, 0, len(revs))
	for _, r := range revs {
		mark := ""
		if d.ActiveRevisionID != nil && *d.ActiveRevisionID == r.ID {
			mark = "*"
		}
		rows = append(rows, []string{mark, short(r.ID), r.Status, ago(r.CreatedAt), r.ID})
	}
	a.table([]string{"", "REVISION", "STATUS", "CREATED", "ID"}, rows)
	return nil
}

// previousHealthy picks the newest DEPLOYED revision older than the active
// one: what was serving before the last deploy.
func previousHealthy(revs []Revision, active string) (*Revision, error) {
	for i, r := range revs {
		if r.ID != active {
			continue
		}
		for j := i + 1; j < len(revs); j++ {
			if revs[j].Status == "DEPLOYED" {
				return &revs[j], nil
			}
		}
		return nil, fail(ExitNotFound, "no revision older than the active one (%s) ever deployed; name one: slipway rollback NAME REVISION", short(active))
	}
	return nil, fail(ExitNotFound, "the active revision %s is not in the revision list", short(active))
}

// rollback: slipway rollback NAME [REVISION] — redeploy an earlier revision
// (by default the previous healthy one) and follow it.
func (a *app) rollback(ctx context.Context, args []string) error {
	fs := a.flags("rollback", "NAME [REVISION] [--no-wait]")
	noWait := fs.Bool("no-wait", false, "return once the rollback is queued")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 || len(pos) > 2 {
		return fail(ExitUsage, "rollback takes a deployment and optionally a revision (see slipway rollback -h)")
	}
	if err := a.connect(); err != nil {
		return err
	}
	d, err := a.need(ctx, pos[0])
	if err != nil {
		return err
	}
	revs, err := a.client.Revisions(ctx, d.ID)
	if err != nil {
		return err
	}
	var target *Revision
	if len(pos) == 2 {
		if target, err = findRevision(revs, pos[1]); err != nil {
			return err
		}
	} else {
		if d.ActiveRevisionID == nil {
			return fail(ExitNotFound, "deployment %s serves no revision, so there is nothing to roll back from; name a revision", d.Name)
		}
		if target, err = previousHealthy(revs, *d.ActiveRevisionID); err != nil {
			return err
		}
	}
	// The revision's log already holds its first build and what its
	// agent wrote: follow only what the redeploy adds. Build and deploy
	// lines are numbered apart from agent lines, so each series has its
	// own last id (the last line of the merged log may be either).
	var after, afterAgent int64
	if entries, _, err := a.client.RevisionLogs(ctx, d.ID, target.ID); err == nil {
		after, afterAgent = lastIDs(entries)
	}
	path := "/v2/deployments/" + url.PathEscape(d.ID) + "/revisions/" + url.PathEscape(target.ID) + "/redeploy"
	if err := a.client.Do(ctx, http.MethodPost, path, nil, nil); err != nil {
		return err
	}
	say := a.env.Stdout
	if a.jsonOut {
		say = a.env.Stderr
	}
	fmt.Fprintf(say, "Rolling %s back to revision %s (created %s)\n", d.Name, short(target.ID), ago(target.CreatedAt))
	if *noWait {
		if a.jsonOut {
			return a.printJSON(map[string]any{"deployment_id": d.ID, "name": d.Name, "revision_id": target.ID, "status": "QUEUED"})
		}
		return nil
	}
	return a.watch(ctx, d.ID, d.Name, target.ID, FollowOptions{After: after, AfterAgent: afterAgent}, graphConfig{})
}

// remove: slipway rm NAME [--yes] — delete a deployment and wait until the
// runtime has removed it.
func (a *app) remove(ctx context.Context, args []string) error {
	fs := a.flags("rm", "NAME [--yes] [--no-wait]")
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	noWait := fs.Bool("no-wait", false, "return once the deletion is accepted")
	d, err := a.theDeployment(ctx, "rm", fs, args)
	if err != nil {
		return err
	}
	if !*yes {
		if !tty(a.env.Stdin) {
			return fail(ExitUsage, "refusing to delete %s without confirmation: pass --yes", d.Name)
		}
		fmt.Fprintf(a.env.Stderr, "Delete deployment %s with its revisions and agent data? Type its name to confirm: ", d.Name)
		var answer string
		fmt.Fscanln(a.env.Stdin, &answer)
		if answer != d.Name {
			return fail(ExitUsage, "not deleted")
		}
	}
	if err := a.client.Do(ctx, http.MethodDelete, "/v2/deployments/"+url.PathEscape(d.ID), nil, nil); err != nil {
		return err
	}
	if !*noWait {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			_, err := a.client.Deployment(ctx, d.ID)
			var ae *APIError
			if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
				break
			}
			if err != nil && !errors.As(err, &ae) {
				return err
			}
			if time.Now().After(deadline) {
				return fail(ExitFailed, "deployment %s is still being deleted after 2 minutes; see slipway status %s", d.Name, d.ID)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(300 * time.Millisecond):
			}
		}
	}
	if a.jsonOut {
		return a.printJSON(map[string]any{"deployment_id": d.ID, "name": d.Name, "deleted": !*noWait})
	}
	fmt.Fprintf(a.env.Stdout, "Deleted %s (%s)\n", d.Name, d.ID)
	return nil
}
