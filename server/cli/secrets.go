package cli

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// secrets: slipway secrets NAME [set K=V ... [--env-file F] [--replace] |
// unset K ...]. The server never returns secret values and a PATCH
// replaces the whole list, so a change must give the value of every
// secret it keeps: one that would drop a secret not named is refused
// unless --replace says so. A change creates a revision, which is followed.
func (a *app) secrets(ctx context.Context, args []string) error {
	fs := a.flags("secrets", "NAME [set K=V ... [--env-file .env] [--replace] | unset K ...] [--no-wait]")
	envFile := fs.String("env-file", "", "set: read NAME=VALUE lines from a dotenv file")
	replace := fs.Bool("replace", false, "set: drop the secrets not given (their values cannot be read back)")
	noWait := fs.Bool("no-wait", false, "return once the new revision is created")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 {
		return fail(ExitUsage, "secrets takes a deployment name (see slipway secrets -h)")
	}
	action, rest := "", pos[1:]
	if len(rest) > 0 {
		action, rest = rest[0], rest[1:]
	}
	if action != "" && action != "set" && action != "unset" {
		return fail(ExitUsage, "secrets: unknown action %q: use set or unset", action)
	}
	if action == "set" && len(rest) == 0 && *envFile == "" {
		return fail(ExitUsage, "secrets set takes NAME=VALUE pairs or --env-file")
	}
	if action == "unset" && len(rest) == 0 {
		return fail(ExitUsage, "secrets unset takes secret names")
	}
	if err := a.connect(); err != nil {
		return err
	}
	d, err := a.need(ctx, pos[0])
	if err != nil {
		return err
	}
	if action == "" {
		names := make([]string, 0, len(d.Secrets))
		for _, s := range d.Secrets {
			names = append(names, s.Name)
		}
		if a.jsonOut {
			return a.printJSON(names)
		}
		if len(names) == 0 {
			fmt.Fprintf(a.env.Stdout, "%s has no secrets\n", d.Name)
		}
		for _, n := range names {
			fmt.Fprintln(a.env.Stdout, n)
		}
		return nil
	}
	next := map[string]string{}
	switch action {
	case "set":
		given, err := readSecrets(*envFile, rest)
		if err != nil {
			return err
		}
		next = given
		if gone := dropped(d.Secrets, next); len(gone) > 0 && !*replace {
			return fail(ExitUsage, "%s also has the secrets %s; the server never reveals secret values and a change replaces "+
				"the whole list, so give them again, or pass --replace to drop them", d.Name, strings.Join(gone, ", "))
		}
	case "unset":
		drop := map[string]bool{}
		for _, n := range rest {
			drop[n] = true
		}
		var keep []string
		for _, s := range d.Secrets {
			if !drop[s.Name] {
				keep = append(keep, s.Name)
			}
		}
		for n := range drop {
			found := false
			for _, s := range d.Secrets {
				found = found || s.Name == n
			}
			if !found {
				return fail(ExitNotFound, "%s has no secret %s", d.Name, n)
			}
		}
		if len(keep) > 0 {
			return fail(ExitUsage, "%s would keep the secrets %s, whose values the server never reveals; "+
				"set the ones to keep instead: slipway secrets %s set NAME=VALUE ... --replace", d.Name, strings.Join(keep, ", "), d.Name)
		}
	}
	var updated Deployment
	if err := a.client.Do(ctx, http.MethodPatch, "/v2/deployments/"+url.PathEscape(d.ID),
		map[string]any{"secrets": secretList(next)}, &updated); err != nil {
		return err
	}
	say := a.env.Stdout
	if a.jsonOut {
		say = a.env.Stderr
	}
	fmt.Fprintf(say, "Secrets of %s are now: %s\n", d.Name, strings.Join(sortedKeys(next), ", "))
	// Nothing to follow before the first deploy: the revision waits for source.
	if updated.LatestRevisionID == nil || *noWait || d.ActiveRevisionID == nil {
		return nil
	}
	return a.watch(ctx, d.ID, d.Name, *updated.LatestRevisionID, FollowOptions{}, graphConfig{})
}
