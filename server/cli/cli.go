// Package cli is the client side of the slipway binary: `slipway deploy`,
// `ls`, `status`, `revisions`, `logs`, `rollback`, `rm`, `secrets`, `keys`
// and `login`. Every command talks HTTP to a control plane — Slipway's own
// or any other that serves the documented control-plane API — and never
// touches a data directory.
//
// Where a command talks: --url / SLIPWAY_URL (default the local server),
// --api-key / SLIPWAY_API_KEY, --workspace / SLIPWAY_WORKSPACE (sent as
// X-Tenant-Id); `slipway login` stores them in the user's configuration
// directory. Flags win over the environment, which wins over the file.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mattn/go-isatty"
)

// Exit codes, documented in the README and in `slipway help`.
const (
	ExitOK          = 0 // done
	ExitFailed      = 1 // the revision failed to build or deploy, or the server failed (5xx)
	ExitUsage       = 2 // bad command line or local input (no langgraph.json, bad .env)
	ExitUnreachable = 3 // no answer from the server
	ExitAuth        = 4 // the server refused the credentials (401) or the permission (403)
	ExitNotFound    = 5 // no such deployment, revision or key
	ExitRefused     = 6 // the server refused the request (400, 409, 413, 422, 429)
)

// DefaultURL is where `slipway serve` listens by default.
const DefaultURL = "http://127.0.0.1:8484"

// Commands lists the client commands with a one-line summary, in the
// order `slipway help` shows them.
var Commands = []struct{ Name, Summary string }{
	{"deploy", "ship a directory: create the deployment if needed, upload, follow the build"},
	{"ls", "list deployments"},
	{"status", "show one deployment"},
	{"revisions", "list a deployment's revisions"},
	{"logs", "print (or follow with -f) a revision's build and deploy logs"},
	{"rollback", "serve an earlier revision again (default: the previous healthy one)"},
	{"rm", "delete a deployment"},
	{"secrets", "list, set or unset a deployment's secrets"},
	{"keys", "list, create or revoke your API keys"},
	{"users", "list the organization's users, or add one who signs in with a password, with a role"},
	{"login", "store the server URL and API key for later commands"},
}

// IsCommand reports whether name is a client command.
func IsCommand(name string) bool {
	for _, c := range Commands {
		if c.Name == name {
			return true
		}
	}
	return false
}

// Env is what a command runs with: its streams and the process
// environment, passed in so that tests can run commands in-process.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// ConfigDir overrides os.UserConfigDir (tests).
	ConfigDir string
	// HTTP, when set, is the HTTP client commands use (tests: one that
	// takes every host name to a local server). The transport guard
	// wraps it like the default one.
	HTTP *http.Client
}

// OSEnv is the Env of the running process.
func OSEnv() Env {
	return Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
}

// exitError ends a command with a code and one sentence for the user.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func fail(code int, format string, args ...any) error {
	return &exitError{code: code, msg: fmt.Sprintf(format, args...)}
}

// Main runs the client command cmd with its arguments and returns the
// process exit code. Errors are printed as one sentence (and the server's
// detail), never as a stack.
func Main(ctx context.Context, cmd string, args []string, env Env) int {
	a := &app{env: env}
	run, ok := map[string]func(context.Context, []string) error{
		"deploy": a.deploy, "ls": a.list, "status": a.status, "revisions": a.revisions,
		"logs": a.logs, "rollback": a.rollback, "rm": a.remove, "secrets": a.secrets,
		"keys": a.keys, "users": a.users, "login": a.login,
	}[cmd]
	if !ok {
		fmt.Fprintf(env.Stderr, "slipway: unknown command %q\n", cmd)
		return ExitUsage
	}
	err := run(ctx, args)
	if err == nil {
		return ExitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		fmt.Fprintln(env.Stderr, "slipway: interrupted")
		return 130
	}
	code, msg := describe(err)
	fmt.Fprintln(env.Stderr, "slipway "+cmd+": "+msg)
	return code
}

// describe turns an error into an exit code and a sentence.
func describe(err error) (int, string) {
	var ee *exitError
	var ae *APIError
	var ue *unreachableError
	var ie *insecureError
	switch {
	case errors.As(err, &ee):
		return ee.code, ee.msg
	case errors.As(err, &ie):
		return ExitUsage, ie.Error()
	case errors.As(err, &ae):
		return ae.ExitCode(), ae.Error()
	case errors.As(err, &ue):
		return ExitUnreachable, ue.Error()
	}
	return ExitFailed, err.Error()
}

// app holds the settings shared by every command, filled by the common
// flags and the environment.
type app struct {
	env Env

	url, apiKey, workspace string
	jsonOut                bool
	insecure               bool
	client                 *Client
}

// flags returns a FlagSet for cmd with the common flags registered.
func (a *app) flags(cmd, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet("slipway "+cmd, flag.ContinueOnError)
	fs.SetOutput(a.env.Stderr)
	fs.StringVar(&a.url, "url", "", "server URL (SLIPWAY_URL; default "+DefaultURL+")")
	fs.StringVar(&a.apiKey, "api-key", "", "API key (SLIPWAY_API_KEY)")
	fs.StringVar(&a.workspace, "workspace", "", "workspace id, sent as X-Tenant-Id (SLIPWAY_WORKSPACE)")
	fs.BoolVar(&a.jsonOut, "json", false, "print JSON for scripts")
	fs.BoolVar(&a.insecure, "insecure", false,
		"send the API key over plain http:// to a host other than this machine, readable by the network (SLIPWAY_INSECURE=1)")
	fs.Usage = func() {
		fmt.Fprintf(a.env.Stderr, "usage: slipway %s %s\n\nflags:\n", cmd, usage)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args with flags allowed anywhere (`deploy ./dir --name x`),
// returning the positional arguments. Everything after "--" is positional.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var tail []string
	for i, s := range args {
		if s == "--" {
			args, tail = args[:i], args[i+1:]
			break
		}
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fail(ExitUsage, "%v (see slipway %s -h)", err, strings.TrimPrefix(fs.Name(), "slipway "))
		}
		left := fs.Args()
		if len(left) == 0 {
			return append(pos, tail...), nil
		}
		pos = append(pos, left[0])
		args = left[1:]
	}
}

// parseAction is parse for a command whose first positional argument is
// an action (keys create, users add), def when none is given.
func parseAction(fs *flag.FlagSet, args []string, def string) (string, []string, error) {
	pos, err := parse(fs, args)
	if err != nil || len(pos) == 0 {
		return def, pos, err
	}
	return pos[0], pos[1:], nil
}

// connect resolves where to talk and with which key: flags, then the
// environment, then the file `slipway login` wrote, then the default URL.
func (a *app) connect() error {
	cfg, err := loadConfig(a.configPath())
	if err != nil {
		return err
	}
	pick := func(flagVal, envName, fileVal, def string) string {
		for _, v := range []string{flagVal, a.env.Getenv(envName), fileVal} {
			if v != "" {
				return v
			}
		}
		return def
	}
	a.url = strings.TrimRight(pick(a.url, "SLIPWAY_URL", cfg.URL, DefaultURL), "/")
	a.apiKey = pick(a.apiKey, "SLIPWAY_API_KEY", cfg.APIKey, "")
	a.workspace = pick(a.workspace, "SLIPWAY_WORKSPACE", cfg.Workspace, "")
	if !strings.HasPrefix(a.url, "http://") && !strings.HasPrefix(a.url, "https://") {
		return fail(ExitUsage, "the server URL %q must start with http:// or https://", a.url)
	}
	// --insecure is never stored by login: each command (or the
	// environment of a CI job) has to say it again.
	if v := a.env.Getenv("SLIPWAY_INSECURE"); v != "" && !a.insecure {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return fail(ExitUsage, "SLIPWAY_INSECURE=%q is not a boolean (1 or 0)", v)
		}
		a.insecure = on
	}
	a.client = &Client{BaseURL: a.url, APIKey: a.apiKey, Workspace: a.workspace, Insecure: a.insecure, HTTP: a.env.HTTP}
	if u, err := url.Parse(a.url); err == nil && a.insecure && checkTransport(u, false) != nil {
		fmt.Fprintf(a.env.Stderr, "slipway: warning: --insecure: the API key goes to %s in clear text\n", a.url)
	}
	return nil
}

// tty reports whether w is a terminal (progress display, prompts).
func tty(w any) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// printJSON writes v indented, for --json.
func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.env.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table prints rows under a header, aligned with text/tabwriter.
func (a *app) table(header []string, rows [][]string) {
	tw := tabwriter.NewWriter(a.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
}

// short abbreviates an id for tables: its last 8 characters, since the
// ids are time-ordered (UUIDv7) and share their leading ones. Every command
// accepts it back.
func short(id string) string {
	if len(id) > 8 {
		return id[len(id)-8:]
	}
	return id
}

func deref(s *string, def string) string {
	if s == nil || *s == "" {
		return def
	}
	return *s
}

// ago formats a time for tables.
func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return t.Local().Format("2006-01-02")
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
