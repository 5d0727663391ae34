package cli

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// Paths of the organization API that `slipway users` drives.
const (
	rolesPath        = "/api/v1/orgs/current/roles"
	basicUsersPath   = "/api/v1/orgs/current/members/basic/batch"
	orgMembersPath   = "/api/v1/orgs/current/members"
	wsMembersPath    = "/api/v1/workspaces/current/members"
	defaultOrgRole   = "user"
	roleNamesInUsage = "admin, editor or viewer (or a custom workspace role's name)"
)

// role is an entry of GET /api/v1/orgs/current/roles.
type role struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	DisplayName string `json:"display_name"`
	AccessScope string `json:"access_scope"`
}

// roleAllows says, for the built-in workspace roles, what a user added
// with them can do: printed when a user is added, so that nobody is left
// wondering why a page is empty.
var roleAllows = map[string]string{
	"Admin":  "deploys, runs agents and manages the workspace's keys and members",
	"Editor": "deploys and runs agents",
	"Viewer": "reads deployments, assistants and threads, but cannot deploy or start runs",
}

// users: slipway users [list | add EMAIL --role ROLE [--org-role ROLE]
// [--name NAME] [--password-stdin]].
func (a *app) users(ctx context.Context, args []string) error {
	fs := a.flags("users", "[list | add EMAIL --role admin|editor|viewer [--org-role admin|operator|user|viewer] [--name NAME] [--password-stdin]]")
	wsRole := fs.String("role", "", "add: the user's role in the workspace: "+roleNamesInUsage)
	orgRole := fs.String("org-role", defaultOrgRole, "add: the user's organization role: admin, operator, user or viewer")
	name := fs.String("name", "", "add: the user's full name")
	pwStdin := fs.Bool("password-stdin", false, "add: read the password from the first line of standard input (default: one is generated and shown once)")
	action, pos, err := parseAction(fs, args, "list")
	if err != nil {
		return err
	}
	switch action {
	case "list", "ls":
		if len(pos) > 0 {
			return fail(ExitUsage, "users list takes no arguments")
		}
		if err := a.connect(); err != nil {
			return err
		}
		return a.listUsers(ctx)
	case "add":
		if len(pos) != 1 {
			return fail(ExitUsage, "users add takes one email address")
		}
		if *wsRole == "" {
			return fail(ExitUsage, "users add needs --role: %s", roleNamesInUsage)
		}
		if err := a.connect(); err != nil {
			return err
		}
		return a.addUser(ctx, pos[0], *wsRole, *orgRole, *name, *pwStdin)
	}
	return fail(ExitUsage, "users: unknown action %q: use list or add", action)
}

// findRole resolves a role given on the command line ("editor",
// "Editor", "WORKSPACE_EDITOR", "operator", a custom role's name) among
// the organization's roles of scope.
func findRole(roles []role, scope, given string) (role, error) {
	g := strings.ToLower(strings.TrimSpace(given))
	var names []string
	for _, r := range roles {
		if r.AccessScope != scope {
			continue
		}
		short := strings.ToLower(r.DisplayName)
		if scope == "organization" {
			short = strings.TrimPrefix(short, "organization ")
		}
		names = append(names, short)
		if g == short || g == strings.ToLower(r.DisplayName) || g == strings.ToLower(r.Name) {
			return r, nil
		}
	}
	sort.Strings(names)
	return role{}, fail(ExitUsage, "no %s role %q: the roles are %s", scope, given, strings.Join(names, ", "))
}

func (a *app) addUser(ctx context.Context, email, wsRole, orgRole, name string, pwStdin bool) error {
	var roles []role
	if err := a.client.Do(ctx, http.MethodGet, rolesPath, nil, &roles); err != nil {
		return err
	}
	ws, err := findRole(roles, "workspace", wsRole)
	if err != nil {
		return err
	}
	org, err := findRole(roles, "organization", orgRole)
	if err != nil {
		return err
	}
	req := map[string]any{"email": email, "role_id": org.ID, "workspace_role_id": ws.ID}
	if a.workspace != "" {
		req["workspace_ids"] = []string{a.workspace}
	}
	if name != "" {
		req["full_name"] = name
	}
	if pwStdin {
		line, err := bufio.NewReader(a.env.Stdin).ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			return fail(ExitUsage, "--password-stdin: standard input holds no password (%v)", err)
		}
		req["password"] = line
	}
	var out []struct {
		ID       string  `json:"id"`
		Email    string  `json:"email"`
		Password *string `json:"password"`
	}
	if err := a.client.Do(ctx, http.MethodPost, basicUsersPath, []any{req}, &out); err != nil {
		return err
	}
	if len(out) != 1 {
		return fmt.Errorf("add the user: the server answered %d users for one", len(out))
	}
	if a.jsonOut {
		return a.printJSON(map[string]any{"id": out[0].ID, "email": out[0].Email, "organization_role": org.DisplayName,
			"workspace_role": ws.DisplayName, "password": out[0].Password})
	}
	allows := roleAllows[ws.DisplayName]
	if allows == "" {
		allows = "what the custom role's permissions allow"
	}
	fmt.Fprintf(a.env.Stderr, "Added %s as %s, workspace role %s: %s.\n", out[0].Email, org.DisplayName, ws.DisplayName, allows)
	if out[0].Password != nil {
		fmt.Fprintln(a.env.Stderr, "Their password is shown once; pass it on now (they sign in with it at the dashboard or POST /api/v1/login):")
		fmt.Fprintln(a.env.Stdout, *out[0].Password)
	}
	return nil
}

// member is the part of a members listing `users list` shows.
type member struct {
	UserID      string   `json:"user_id"`
	Email       string   `json:"email"`
	FullName    string   `json:"full_name"`
	RoleName    *string  `json:"role_name"`
	OrgRoleName *string  `json:"org_role_name"`
	Logins      []string `json:"linked_login_methods"`
}

func (a *app) listUsers(ctx context.Context) error {
	var org struct {
		Members []member `json:"members"`
	}
	if err := a.client.Do(ctx, http.MethodGet, orgMembersPath, nil, &org); err != nil {
		return err
	}
	var ws struct {
		Members []member `json:"members"`
	}
	if err := a.client.Do(ctx, http.MethodGet, wsMembersPath, nil, &ws); err != nil {
		return err
	}
	wsRole := map[string]string{}
	for _, m := range ws.Members {
		if m.RoleName != nil {
			wsRole[m.UserID] = *m.RoleName
		}
	}
	if a.jsonOut {
		type row struct {
			member
			WorkspaceRole string `json:"workspace_role"`
		}
		rows := make([]row, 0, len(org.Members))
		for _, m := range org.Members {
			rows = append(rows, row{m, wsRole[m.UserID]})
		}
		return a.printJSON(rows)
	}
	rows := make([][]string, 0, len(org.Members))
	for _, m := range org.Members {
		orgRole, ws := "", wsRole[m.UserID]
		if m.OrgRoleName != nil {
			orgRole = *m.OrgRoleName
		}
		if ws == "" {
			ws = "-"
		}
		rows = append(rows, []string{m.Email, m.FullName, orgRole, ws, strings.Join(m.Logins, ",")})
	}
	a.table([]string{"EMAIL", "NAME", "ORGANIZATION ROLE", "WORKSPACE ROLE", "LOGIN"}, rows)
	return nil
}
