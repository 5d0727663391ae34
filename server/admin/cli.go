package admin

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"slipway/server/audit"
)

// Usage is the help of `slipway admin`.
const Usage = `usage: slipway admin <command> [arguments]

Talks to the running server over <SLIPWAY_DATA_DIR>/admin/admin.sock with the
token in <SLIPWAY_DATA_DIR>/admin/token (both reachable only by the user that
runs slipway serve: run it as that user, or as root).

organizations:
  org create --name NAME [--plan free|plus|enterprise] [--personal]
                                     create an organization with a Default workspace; prints its id
  org list [--json]                  list organizations
  org set-plan ORG_ID PLAN           set the plan (free, plus, enterprise)
  org set-flag ORG_ID FLAG true|false
                                     set a config flag (can_use_audit_logs); not for personal organizations
  org unset-flag ORG_ID FLAG         remove a flag, so DEFAULT_ORG_FEATURE_* applies again
  org create-admin-key ORG_ID        create an organization-admin service key; prints the key, once

audit log:
  audit verify [--json]              walk every chain; exit 1 naming the first broken record per organization
  audit prune --before TIME [--org ORG_ID]
                                     delete events older than TIME (RFC 3339), keeping the chains verifiable
  audit forward-status [--json]      show the forwarder's configuration and per-organization progress
`

// Main runs `slipway admin args...` against the server using dataDir and
// returns the exit status: 0 done, 1 failed (or the chain is broken), 2
// usage error.
func Main(args []string, dataDir string, stdout, stderr io.Writer) int {
	c := NewClient(dataDir)
	usage := func(format string, a ...any) int {
		if format != "" {
			fmt.Fprintf(stderr, "slipway admin: "+format+"\n\n", a...)
		}
		fmt.Fprint(stderr, Usage)
		return 2
	}
	if len(args) < 1 {
		return usage("")
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, Usage)
		return 0
	}
	if len(args) < 2 {
		return usage("%s: missing subcommand", args[0])
	}
	group, cmd, rest := args[0], args[1], args[2:]
	fs := flag.NewFlagSet("slipway admin "+group+" "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print JSON")
	parse := func(npos int) ([]string, error) {
		// Flags may come before or after the positional arguments.
		var pos []string
		rest := rest
		for {
			if err := fs.Parse(rest); err != nil {
				return nil, err
			}
			rest = fs.Args()
			if len(rest) == 0 {
				break
			}
			pos, rest = append(pos, rest[0]), rest[1:]
		}
		if len(pos) != npos {
			return nil, fmt.Errorf("want %d argument(s), got %d", npos, len(pos))
		}
		return pos, nil
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "slipway admin:", err)
		return 1
	}
	printJSON := func(v any) int {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(v)
		return 0
	}
	orgPath := func(id string) string { return "/v1/orgs/" + url.PathEscape(id) }
	// call asks the server and decodes its answer into out; done says the
	// command has ended there (an error reported, or --json printed), with
	// exit status code.
	call := func(method, path string, body, out any) (code int, done bool) {
		if err := c.Do(method, path, body, out); err != nil {
			return fail(err), true
		}
		if *asJSON {
			return printJSON(out), true
		}
		return 0, false
	}

	switch group + " " + cmd {
	case "org create":
		name := fs.String("name", "", "organization name")
		plan := fs.String("plan", "free", "free, plus or enterprise")
		personal := fs.Bool("personal", false, "a personal organization")
		if _, err := parse(0); err != nil {
			return usage("%s %s: %v", group, cmd, err)
		}
		if *name == "" {
			return usage("org create: --name is required")
		}
		var org OrgView
		if code, done := call("POST", "/v1/orgs", CreateOrgRequest{Name: *name, Plan: *plan, Personal: *personal}, &org); done {
			return code
		}
		fmt.Fprintln(stdout, org.ID)
		fmt.Fprintf(stderr, "created organization %q (%s plan%s) with workspace Default %s\n",
			org.DisplayName, org.Plan, map[bool]string{true: ", personal"}[org.IsPersonal], org.DefaultWorkspaceID)
		return 0

	case "org list":
		if _, err := parse(0); err != nil {
			return usage("%s %s: %v", group, cmd, err)
		}
		var orgs []OrgView
		if code, done := call("GET", "/v1/orgs", nil, &orgs); done {
			return code
		}
		tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tPLAN\tPERSONAL\tFLAGS\tAUDIT LOGS\tCREATED")
		for _, o := range orgs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%t\t%s\t%t\t%s\n", o.ID, o.DisplayName, o.Plan, o.IsPersonal,
				flags(o.Config), o.AuditLogsEnabled, o.CreatedAt.Format(time.RFC3339))
		}
		_ = tw.Flush()
		return 0

	case "org set-plan":
		pos, err := parse(2)
		if err != nil {
			return usage("org set-plan ORG_ID PLAN: %v", err)
		}
		var org OrgView
		if err := c.Do("PUT", orgPath(pos[0])+"/plan", map[string]string{"plan": pos[1]}, &org); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "organization %s is on the %s plan\n", org.ID, org.Plan)
		return 0

	case "org set-flag":
		pos, err := parse(3)
		if err != nil {
			return usage("org set-flag ORG_ID FLAG true|false: %v", err)
		}
		var v bool
		switch strings.ToLower(pos[2]) {
		case "true":
			v = true
		case "false":
		default:
			return usage("org set-flag: the value must be true or false, not %q", pos[2])
		}
		var org OrgView
		if err := c.Do("PUT", orgPath(pos[0])+"/flags/"+url.PathEscape(pos[1]), map[string]bool{"value": v}, &org); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "organization %s: %s = %t (audit logs enabled: %t)\n", org.ID, pos[1], v, org.AuditLogsEnabled)
		return 0

	case "org unset-flag":
		pos, err := parse(2)
		if err != nil {
			return usage("org unset-flag ORG_ID FLAG: %v", err)
		}
		var org OrgView
		if err := c.Do("DELETE", orgPath(pos[0])+"/flags/"+url.PathEscape(pos[1]), nil, &org); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "organization %s: %s unset (audit logs enabled: %t)\n", org.ID, pos[1], org.AuditLogsEnabled)
		return 0

	case "org create-admin-key":
		pos, err := parse(1)
		if err != nil {
			return usage("org create-admin-key ORG_ID: %v", err)
		}
		var k AdminKeyResponse
		if err := c.Do("POST", orgPath(pos[0])+"/admin-keys", nil, &k); err != nil {
			return fail(err)
		}
		// The key goes to stdout alone, so it can be captured; it is not
		// stored anywhere and cannot be shown again.
		fmt.Fprintln(stdout, k.Key)
		fmt.Fprintf(stderr, "created organization-admin key %s (%s) for organization %s; it is shown only this once\n",
			k.ID, k.ShortKey, k.OrgID)
		return 0

	case "audit verify":
		if _, err := parse(0); err != nil {
			return usage("%s %s: %v", group, cmd, err)
		}
		var rep audit.VerifyReport
		if err := c.Do("GET", "/v1/audit/verify", nil, &rep); err != nil {
			return fail(err)
		}
		if *asJSON {
			printJSON(rep)
		} else if len(rep.Breaks) == 0 {
			fmt.Fprintf(stdout, "audit log intact: %d organization(s), %d event(s) verified", rep.Organizations, rep.Events)
			if rep.SealedSince != nil {
				fmt.Fprintf(stdout, "; chain heads sealed since %s", rep.SealedSince.Format(time.RFC3339))
			}
			fmt.Fprintln(stdout)
		} else {
			fmt.Fprintf(stdout, "audit log BROKEN: %d break(s), %d organization(s) checked:\n", len(rep.Breaks), rep.Organizations)
			for _, b := range rep.Breaks {
				if b.Org == "" {
					// The manifest covers every chain: no one organization to name.
					fmt.Fprintf(stdout, "  every organization: %s\n", b.Reason)
					continue
				}
				fmt.Fprintf(stdout, "  organization %s: first broken record seq %d: %s\n", b.Org, b.Seq, b.Reason)
			}
		}
		if len(rep.Breaks) > 0 {
			return 1
		}
		return 0

	case "audit prune":
		before := fs.String("before", "", "RFC 3339 time")
		org := fs.String("org", "", "only this organization")
		if _, err := parse(0); err != nil {
			return usage("%s %s: %v", group, cmd, err)
		}
		t, err := time.Parse(time.RFC3339Nano, *before)
		if err != nil {
			return usage("audit prune: --before must be an RFC 3339 time (2006-01-02T15:04:05Z): %v", err)
		}
		var out PruneResponse
		if code, done := call("POST", "/v1/audit/prune", PruneRequest{Before: t, Org: *org}, &out); done {
			return code
		}
		total := 0
		for _, n := range out.Pruned {
			total += n
		}
		for _, id := range slices.Sorted(maps.Keys(out.Pruned)) {
			fmt.Fprintf(stdout, "organization %s: pruned %d event(s)\n", id, out.Pruned[id])
		}
		fmt.Fprintf(stdout, "pruned %d event(s) older than %s\n", total, out.Before.Format(time.RFC3339Nano))
		return 0

	case "audit forward-status":
		if _, err := parse(0); err != nil {
			return usage("%s %s: %v", group, cmd, err)
		}
		var st audit.ForwardStatus
		if code, done := call("GET", "/v1/audit/forward", nil, &st); done {
			return code
		}
		printForward(stdout, &st)
		return 0
	}
	return usage("unknown command %q", group+" "+cmd)
}

func flags(cfg map[string]any) string {
	if len(cfg) == 0 {
		return "-"
	}
	keys := slices.Sorted(maps.Keys(cfg))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%v", k, cfg[k])
	}
	return strings.Join(parts, ",")
}

func printForward(w io.Writer, st *audit.ForwardStatus) {
	if !st.Enabled {
		fmt.Fprintln(w, "forwarding: not configured (set SLIPWAY_AUDIT_FORWARD_URL)")
	} else {
		fmt.Fprintf(w, "forwarding: %s every %s (grace %s); windows due through %s\n", st.Target, st.Interval, st.Grace, st.DueThrough)
		if st.LastRun != nil {
			fmt.Fprintf(w, "last run: %s", st.LastRun.Format(time.RFC3339))
			if st.Running {
				fmt.Fprint(w, " (running now)")
			}
			fmt.Fprintln(w)
		}
	}
	if len(st.Organizations) == 0 {
		fmt.Fprintln(w, "no organization has audit events yet")
		return
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ORGANIZATION\tFORWARDED THROUGH\tPENDING\tDELIVERED\tATTEMPTS\tRETRY AT\tLAST ERROR")
	for _, o := range st.Organizations {
		through, retry, lastErr := "never", "-", "-"
		if o.ForwardedThrough != nil {
			through = *o.ForwardedThrough
		}
		if o.RetryAt != nil {
			retry = *o.RetryAt
		}
		if o.LastError != "" {
			lastErr = o.LastError
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\n", o.Org, through, o.PendingWindows, o.Delivered, o.Attempts, retry, lastErr)
	}
	_ = tw.Flush()
}
