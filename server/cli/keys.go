package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// apiKey is an entry of the organization API's key lists.
type apiKey struct {
	ID          string     `json:"id"`
	ShortKey    string     `json:"short_key"`
	Description string     `json:"description"`
	ReadOnly    bool       `json:"read_only"`
	CreatedAt   time.Time  `json:"created_at"`
	ExpiresAt   *time.Time `json:"expires_at"`
	LastUsedAt  *time.Time `json:"last_used_at"`
	Key         string     `json:"key,omitempty"`
	Kind        string     `json:"kind"` // set here: "personal" or "service"
}

// Paths of the organization API: the caller's personal access tokens, and
// the service keys of the workspace.
const (
	patPath     = "/api/v1/api-key/current"
	servicePath = "/api/v1/api-key"
)

// parseExpiry accepts a duration with a day unit (30d), a Go duration
// (12h) or an RFC 3339 time.
func parseExpiry(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		if _, err := fmt.Sscanf(days, "%d", &n); err == nil && n > 0 && fmt.Sprint(n) == days {
			return now.AddDate(0, 0, n), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(d), nil
	}
	return time.Time{}, fail(ExitUsage, "--expires %q must be a number of days (30d), a duration (12h) or a time (2026-01-31T00:00:00Z)", s)
}

// keys: slipway keys [list | create [--service] [--description D]
// [--read-only] [--expires 30d] | revoke ID [--service]].
func (a *app) keys(ctx context.Context, args []string) error {
	fs := a.flags("keys", "[list | create [--service] [--description D] [--read-only] [--expires 30d] | revoke ID [--service]]")
	service := fs.Bool("service", false, "a service key of the workspace instead of a personal access token")
	desc := fs.String("description", "", "create: what the key is for")
	readOnly := fs.Bool("read-only", false, "create: a key that may only read")
	expires := fs.String("expires", "", "create: expiry (30d, 12h or an RFC 3339 time; default never)")
	action, pos, err := parseAction(fs, args, "list")
	if err != nil {
		return err
	}
	if err := a.connect(); err != nil {
		return err
	}
	switch action {
	case "list", "ls":
		if len(pos) > 0 {
			return fail(ExitUsage, "keys list takes no arguments")
		}
		return a.listKeys(ctx)
	case "create":
		if len(pos) > 0 {
			return fail(ExitUsage, "keys create takes no arguments; use --description")
		}
		body := map[string]any{"read_only": *readOnly}
		if *desc != "" {
			body["description"] = *desc
		}
		if *expires != "" {
			t, err := parseExpiry(*expires, time.Now())
			if err != nil {
				return err
			}
			body["expires_at"] = t.UTC().Format(time.RFC3339)
		}
		path, kind := patPath, "personal access token"
		if *service {
			path, kind = servicePath, "service key"
		}
		var k apiKey
		if err := a.client.Do(ctx, http.MethodPost, path, body, &k); err != nil {
			return err
		}
		if a.jsonOut {
			return a.printJSON(k)
		}
		fmt.Fprintf(a.env.Stderr, "Created %s %s (%s). It is shown once; store it now:\n", kind, k.ID, k.ShortKey)
		fmt.Fprintln(a.env.Stdout, k.Key)
		return nil
	case "revoke", "rm":
		if len(pos) != 1 {
			return fail(ExitUsage, "keys revoke takes one key id (slipway keys lists them)")
		}
		paths := []string{patPath, servicePath}
		if *service {
			paths = []string{servicePath}
		}
		for i, p := range paths {
			err := a.client.Do(ctx, http.MethodDelete, p+"/"+url.PathEscape(pos[0]), nil, nil)
			var ae *APIError
			if err != nil && i+1 < len(paths) && errors.As(err, &ae) && ae.Status == http.StatusNotFound {
				continue // not a personal token: try the service keys
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(a.env.Stdout, "Revoked %s\n", pos[0])
			return nil
		}
	}
	return fail(ExitUsage, "keys: unknown action %q: use list, create or revoke", action)
}

func (a *app) listKeys(ctx context.Context) error {
	var pats, svc []apiKey
	if err := a.client.Do(ctx, http.MethodGet, patPath, nil, &pats); err != nil {
		return err
	}
	// Listing service keys needs the workspace Admin role; without it the
	// caller still sees their own tokens.
	svcErr := a.client.Do(ctx, http.MethodGet, servicePath, nil, &svc)
	var ae *APIError
	if svcErr != nil && !(errors.As(svcErr, &ae) && ae.Status == http.StatusForbidden) {
		return svcErr
	}
	all := make([]apiKey, 0, len(pats)+len(svc))
	for _, k := range pats {
		k.Kind = "personal"
		all = append(all, k)
	}
	for _, k := range svc {
		k.Kind = "service"
		all = append(all, k)
	}
	if a.jsonOut {
		return a.printJSON(all)
	}
	rows := make([][]string, 0, len(all))
	for _, k := range all {
		exp, used, access := "never", "never", "read-write"
		if k.ExpiresAt != nil {
			exp = k.ExpiresAt.Local().Format("2006-01-02")
		}
		if k.LastUsedAt != nil {
			used = ago(*k.LastUsedAt)
		}
		if k.ReadOnly {
			access = "read-only"
		}
		rows = append(rows, []string{k.Kind, k.ID, k.ShortKey, access, exp, used, k.Description})
	}
	a.table([]string{"KIND", "ID", "KEY", "ACCESS", "EXPIRES", "LAST USED", "DESCRIPTION"}, rows)
	if svcErr != nil {
		fmt.Fprintln(a.env.Stderr, "(service keys not listed: that needs the workspace Admin role)")
	}
	return nil
}
