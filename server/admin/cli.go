package admin

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"sort"
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
  audit reindex [--org ORG_ID]       rebuild the operation index from the chains (what verify reports of it)
`

// Main runs `slipway admin args...` against the server using dataDir and
// returns the exit status: 0 done, 1 failed (or the chain is broken), 2
// usage error.
func Main(args []string, dataDir string, stdout, stderr io.Writer) int {
	x := &cli{c: NewClient(dataDir), stdout: stdout, stderr: stderr}
	switch {
	case len(args) < 1:
		return x.usage("")
	case args[0] == "help" || args[0] == "-h" || args[0] == "--help":
		fmt.Fprint(stdout, Usage)
		return 0
	case len(args) < 2:
		return x.usage("%s: missing subcommand", args[0])
	}
	x.group, x.cmd, x.rest = args[0], args[1], args[2:]
	x.fs = flag.NewFlagSet("slipway admin "+x.group+" "+x.cmd, flag.ContinueOnError)
	x.fs.SetOutput(io.Discard)
	x.asJSON = x.fs.Bool("json", false, "print JSON")
	run, ok := commands[x.group+" "+x.cmd]
	if !ok {
		return x.usage("unknown command %q", x.group+" "+x.cmd)
	}
	return run(x)
}

// commands are the subcommands of `slipway admin`, by group and name.
var commands = map[string]func(*cli) int{
	"org create":           (*cli).orgCreate,
	"org list":             (*cli).orgList,
	"org set-plan":         (*cli).orgSetPlan,
	"org set-flag":         (*cli).orgSetFlag,
	"org unset-flag":       (*cli).orgUnsetFlag,
	"org create-admin-key": (*cli).orgCreateAdminKey,
	"audit verify":         (*cli).auditVerify,
	"audit prune":          (*cli).auditPrune,
	"audit forward-status": (*cli).auditForwardStatus,
	"audit reindex":        (*cli).auditReindex,
}

// cli is one run of a subcommand: the client, where it writes, and its
// arguments with the flags it defines.
type cli struct {
	c              *Client
	stdout, stderr io.Writer
	group, cmd     string
	rest           []string
	fs             *flag.FlagSet
	asJSON         *bool
}

// usage prints what went wrong (unless format is empty) and the usage.
func (x *cli) usage(format string, a ...any) int {
	if format != "" {
		fmt.Fprintf(x.stderr, "slipway admin: "+format+"\n\n", a...)
	}
	fmt.Fprint(x.stderr, Usage)
	return 2
}

// badArgs is usage for arguments parse refused.
func (x *cli) badArgs(err error) int { return x.usage("%s %s: %v", x.group, x.cmd, err) }

// parse parses the flags, which may come before or after the positional
// arguments, and wants npos of those.
func (x *cli) parse(npos int) ([]string, error) {
	var pos []string
	rest := x.rest
	for {
		if err := x.fs.Parse(rest); err != nil {
			return nil, err
		}
		rest = x.fs.Args()
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

func (x *cli) fail(err error) int {
	fmt.Fprintln(x.stderr, "slipway admin:", err)
	return 1
}

func (x *cli) printJSON(v any) int {
	enc := json.NewEncoder(x.stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
	return 0
}

func orgPath(id string) string { return "/v1/orgs/" + url.PathEscape(id) }

func (x *cli) orgCreate() int {
	name := x.fs.String("name", "", "organization name")
	plan := x.fs.String("plan", "free", "free, plus or enterprise")
	personal := x.fs.Bool("personal", false, "a personal organization")
	if _, err := x.parse(0); err != nil {
		return x.badArgs(err)
	}
	if *name == "" {
		return x.usage("org create: --name is required")
	}
	var org OrgView
	if err := x.c.Do("POST", "/v1/orgs", CreateOrgRequest{Name: *name, Plan: *plan, Personal: *personal}, &org); err != nil {
		return x.fail(err)
	}
	if *x.asJSON {
		return x.printJSON(org)
	}
	fmt.Fprintln(x.stdout, org.ID)
	fmt.Fprintf(x.stderr, "created organization %q (%s plan%s) with workspace Default %s\n",
		org.DisplayName, org.Plan, map[bool]string{true: ", personal"}[org.IsPersonal], org.DefaultWorkspaceID)
	return 0
}

// get runs a subcommand that takes no arguments and reads path into out;
// done is false with the exit status when it could not.
func (x *cli) get(path string, out any) (status int, done bool) {
	if _, err := x.parse(0); err != nil {
		return x.badArgs(err), false
	}
	if err := x.c.Do("GET", path, nil, out); err != nil {
		return x.fail(err), false
	}
	return 0, true
}

func (x *cli) orgList() int {
	var orgs []OrgView
	if status, done := x.get("/v1/orgs", &orgs); !done {
		return status
	}
	if *x.asJSON {
		return x.printJSON(orgs)
	}
	tw := tabwriter.NewWriter(x.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tPLAN\tPERSONAL\tFLAGS\tAUDIT LOGS\tCREATED")
	for _, o := range orgs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%t\t%s\t%t\t%s\n", o.ID, o.DisplayName, o.Plan, o.IsPersonal,
			flags(o.Config), o.AuditLogsEnabled, o.CreatedAt.Format(time.RFC3339))
	}
	_ = tw.Flush()
	return 0
}

func (x *cli) orgSetPlan() int {
	pos, err := x.parse(2)
	if err != nil {
		return x.usage("org set-plan ORG_ID PLAN: %v", err)
	}
	var org OrgView
	if err := x.c.Do("PUT", orgPath(pos[0])+"/plan", map[string]string{"plan": pos[1]}, &org); err != nil {
		return x.fail(err)
	}
	fmt.Fprintf(x.stdout, "organization %s is on the %s plan\n", org.ID, org.Plan)
	return 0
}

func (x *cli) orgSetFlag() int {
	pos, err := x.parse(3)
	if err != nil {
		return x.usage("org set-flag ORG_ID FLAG true|false: %v", err)
	}
	var v bool
	switch strings.ToLower(pos[2]) {
	case "true":
		v = true
	case "false":
	default:
		return x.usage("org set-flag: the value must be true or false, not %q", pos[2])
	}
	var org OrgView
	if err := x.c.Do("PUT", orgPath(pos[0])+"/flags/"+url.PathEscape(pos[1]), map[string]bool{"value": v}, &org); err != nil {
		return x.fail(err)
	}
	fmt.Fprintf(x.stdout, "organization %s: %s = %t (audit logs enabled: %t)\n", org.ID, pos[1], v, org.AuditLogsEnabled)
	return 0
}

func (x *cli) orgUnsetFlag() int {
	pos, err := x.parse(2)
	if err != nil {
		return x.usage("org unset-flag ORG_ID FLAG: %v", err)
	}
	var org OrgView
	if err := x.c.Do("DELETE", orgPath(pos[0])+"/flags/"+url.PathEscape(pos[1]), nil, &org); err != nil {
		return x.fail(err)
	}
	fmt.Fprintf(x.stdout, "organization %s: %s unset (audit logs enabled: %t)\n", org.ID, pos[1], org.AuditLogsEnabled)
	return 0
}

func (x *cli) orgCreateAdminKey() int {
	pos, err := x.parse(1)
	if err != nil {
		return x.usage("org create-admin-key ORG_ID: %v", err)
	}
	var k AdminKeyResponse
	if err := x.c.Do("POST", orgPath(pos[0])+"/admin-keys", nil, &k); err != nil {
		return x.fail(err)
	}
	// The key goes to stdout alone, so it can be captured; it is not
	// stored anywhere and cannot be shown again.
	fmt.Fprintln(x.stdout, k.Key)
	fmt.Fprintf(x.stderr, "created organization-admin key %s (%s) for organization %s; it is shown only this once\n",
		k.ID, k.ShortKey, k.OrgID)
	return 0
}

func (x *cli) auditVerify() int {
	var rep audit.VerifyReport
	if status, done := x.get("/v1/audit/verify", &rep); !done {
		return status
	}
	if *x.asJSON {
		x.printJSON(rep)
	} else {
		printVerify(x.stdout, &rep)
	}
	if len(rep.Breaks) > 0 {
		return 1
	}
	return 0
}

func printVerify(w io.Writer, rep *audit.VerifyReport) {
	if len(rep.Breaks) == 0 {
		fmt.Fprintf(w, "audit log intact: %d organization(s), %d event(s) verified", rep.Organizations, rep.Events)
		if rep.SealedSince != nil {
			fmt.Fprintf(w, "; chain heads sealed since %s", rep.SealedSince.Format(time.RFC3339))
		}
		fmt.Fprintln(w)
		return
	}
	fmt.Fprintf(w, "audit log BROKEN: %d break(s), %d organization(s) checked:\n", len(rep.Breaks), rep.Organizations)
	for _, b := range rep.Breaks {
		if b.Org == "" {
			// The manifest covers every chain: no one organization to name.
			fmt.Fprintf(w, "  every organization: %s\n", b.Reason)
			continue
		}
		fmt.Fprintf(w, "  organization %s: first broken record seq %d: %s\n", b.Org, b.Seq, b.Reason)
	}
}

func (x *cli) auditPrune() int {
	before := x.fs.String("before", "", "RFC 3339 time")
	org := x.fs.String("org", "", "only this organization")
	if _, err := x.parse(0); err != nil {
		return x.badArgs(err)
	}
	t, err := time.Parse(time.RFC3339Nano, *before)
	if err != nil {
		return x.usage("audit prune: --before must be an RFC 3339 time (2006-01-02T15:04:05Z): %v", err)
	}
	var out PruneResponse
	if err := x.c.Do("POST", "/v1/audit/prune", PruneRequest{Before: t, Org: *org}, &out); err != nil {
		return x.fail(err)
	}
	if *x.asJSON {
		return x.printJSON(out)
	}
	total := 0
	ids := make([]string, 0, len(out.Pruned))
	for id, n := range out.Pruned {
		ids = append(ids, id)
		total += n
	}
	sort.Strings(ids)
	for _, id := range ids {
		fmt.Fprintf(x.stdout, "organization %s: pruned %d event(s)\n", id, out.Pruned[id])
	}
	fmt.Fprintf(x.stdout, "pruned %d event(s) older than %s\n", total, out.Before.Format(time.RFC3339Nano))
	return 0
}

func (x *cli) auditForwardStatus() int {
	var st audit.ForwardStatus
	if status, done := x.get("/v1/audit/forward", &st); !done {
		return status
	}
	if *x.asJSON {
		return x.printJSON(st)
	}
	printForward(x.stdout, &st)
	return 0
}

func flags(cfg map[string]any) string {
	if len(cfg) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(cfg))
	for k := range cfg {
		keys = append(keys, k)
	}
	sort.Strings(keys)
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
