package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Client speaks the control-plane and organization APIs. It uses only the
// documented endpoints, so it works against any compatible control plane.
type Client struct {
	BaseURL   string
	APIKey    string
	Workspace string
	HTTP      *http.Client
	// Insecure lets requests go over plain http:// to a host other than
	// this machine (see guardTransport).
	Insecure bool
}

// http is the client every request goes through: HTTP's (or one with a
// two-minute timeout) whose transport refuses to send a credential over
// plain http to another host unless Insecure.
func (c *Client) http() *http.Client {
	hc := http.Client{Timeout: 2 * time.Minute}
	if c.HTTP != nil {
		hc = *c.HTTP
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = &guardTransport{base: base, insecure: c.Insecure}
	return &hc
}

// exchange sends req; a transport failure is an unreachableError (or the
// context's error), a refusal to send it in clear text an insecureError.
// timeout false lifts the client's timeout, for streams.
func (c *Client) exchange(req *http.Request, timeout bool) (*http.Response, error) {
	hc := c.http()
	if !timeout {
		hc.Timeout = 0
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ie, ok := asInsecure(err); ok {
			return nil, ie
		}
		if ctxErr := req.Context().Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, &unreachableError{url: c.BaseURL, err: errors.Unwrap(err)}
	}
	return resp, nil
}

// authenticate adds the credential and workspace headers to a request of
// the API.
func (c *Client) authenticate(req *http.Request) {
	if c.APIKey != "" {
		req.Header.Set("X-Api-Key", c.APIKey)
	}
	if c.Workspace != "" {
		req.Header.Set("X-Tenant-Id", c.Workspace)
	}
}

// APIError is a non-2xx answer, with the server's `detail`.
type APIError struct {
	Method, Path string
	Status       int
	Detail       string
}

// ExitCode maps the status to the documented exit codes.
func (e *APIError) ExitCode() int {
	switch {
	case e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden:
		return ExitAuth
	case e.Status == http.StatusNotFound:
		return ExitNotFound
	case e.Status >= 400 && e.Status < 500:
		return ExitRefused
	}
	return ExitFailed
}

// refusals says, in the user's words, what a status means.
var refusals = map[int]string{
	http.StatusUnauthorized:          "the server did not accept the API key (set --api-key or SLIPWAY_API_KEY, or run slipway login)",
	http.StatusForbidden:             "the server refused the request for this key",
	http.StatusNotFound:              "not found",
	http.StatusUnprocessableEntity:   "the server rejected the request as invalid",
	http.StatusConflict:              "the request conflicts with the current state",
	http.StatusRequestEntityTooLarge: "the request is too large for the server",
	http.StatusTooManyRequests:       "the server is throttling requests; try again later",
}

func (e *APIError) Error() string {
	what, ok := refusals[e.Status]
	switch {
	case ok:
	case e.Status >= 500:
		what = "the server failed"
	default:
		what = "the server refused the request"
	}
	msg := fmt.Sprintf("%s (%d from %s %s)", what, e.Status, e.Method, e.Path)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// unreachableError is a transport failure: nothing answered.
type unreachableError struct {
	url string
	err error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("cannot reach the server at %s (%v); is it running? Set --url or SLIPWAY_URL", e.url, e.err)
}

func (e *unreachableError) Unwrap() error { return e.err }

// detailOf extracts `detail` from an error body: a string, or the 422 list
// of {loc, msg} rendered as "body.name: msg; ...".
func detailOf(body []byte) string {
	var v struct {
		Detail json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &v) != nil || len(v.Detail) == 0 {
		s := strings.TrimSpace(string(body))
		if len(s) > 300 {
			s = s[:300] + "…"
		}
		return s
	}
	var s string
	if json.Unmarshal(v.Detail, &s) == nil {
		return s
	}
	var items []struct {
		Loc []any  `json:"loc"`
		Msg string `json:"msg"`
	}
	if json.Unmarshal(v.Detail, &items) == nil && len(items) > 0 {
		parts := make([]string, 0, len(items))
		for _, it := range items {
			loc := make([]string, len(it.Loc))
			for i, l := range it.Loc {
				loc[i] = fmt.Sprint(l)
			}
			parts = append(parts, strings.Join(loc, ".")+": "+it.Msg)
		}
		return strings.Join(parts, "; ")
	}
	return string(v.Detail)
}

// Do sends a JSON request to path (relative to BaseURL) and decodes a 2xx
// JSON answer into out (when out is not nil).
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, rd)
	if err != nil {
		return fail(ExitUsage, "bad server URL %q: %v", c.BaseURL, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	c.authenticate(req)
	return c.send(req, out)
}

func (c *Client) send(req *http.Request, out any) error {
	resp, err := c.exchange(req, true)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return &unreachableError{url: c.BaseURL, err: err}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &APIError{Method: req.Method, Path: req.URL.Path, Status: resp.StatusCode, Detail: detailOf(raw)}
	}
	if out != nil && len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("the server's answer to %s %s is not the expected JSON: %w", req.Method, req.URL.Path, err)
		}
	}
	return nil
}

// Upload PUTs an archive to a pre-signed upload URL. The URL is its own
// credential, so no key is sent: it may point at another host.
func (c *Client) Upload(ctx context.Context, uploadURL string, body io.Reader, size int64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, uploadURL, body)
	if err != nil {
		return fmt.Errorf("upload URL %q: %w", uploadURL, err)
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/gzip")
	return c.send(req, nil)
}

// Deployment is the part of the deployment resource the commands read;
// Raw keeps the whole answer for --json.
type Deployment struct {
	ID               string    `json:"id"`
	Name             string    `json:"name"`
	Source           string    `json:"source"`
	Status           string    `json:"status"`
	URL              *string   `json:"url"`
	LatestRevisionID *string   `json:"latest_revision_id"`
	ActiveRevisionID *string   `json:"active_revision_id"`
	CreatedAt        time.Time `json:"created_at"`
	UpdatedAt        time.Time `json:"updated_at"`
	Secrets          []Secret  `json:"secrets"`

	Raw json.RawMessage `json:"-"`
}

// UnmarshalJSON keeps the raw document beside the decoded fields.
func (d *Deployment) UnmarshalJSON(b []byte) error {
	type plain Deployment // the fields without this method
	return decodeKeepingRaw((*plain)(d), &d.Raw, b)
}

// decodeKeepingRaw decodes b into fields (a type without an UnmarshalJSON
// method, so that this is no recursion) and keeps a copy of b in raw.
func decodeKeepingRaw[T any](fields *T, raw *json.RawMessage, b []byte) error {
	if err := json.Unmarshal(b, fields); err != nil {
		return err
	}
	*raw = append(json.RawMessage(nil), b...)
	return nil
}

// Secret is a deployment secret (values come back redacted).
type Secret struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Revision is one revision of a deployment.
type Revision struct {
	ID        string    `json:"id"`
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`

	Raw json.RawMessage `json:"-"`
}

// UnmarshalJSON keeps the raw document beside the decoded fields.
func (r *Revision) UnmarshalJSON(b []byte) error {
	type plain Revision
	return decodeKeepingRaw((*plain)(r), &r.Raw, b)
}

// LogEntry is one line of a revision's log.
type LogEntry struct {
	ID        int64     `json:"id"`
	Timestamp time.Time `json:"timestamp"`
	Level     string    `json:"level"`
	Message   string    `json:"message"`
	Phase     string    `json:"phase"`
}

type page[T any] struct {
	Resources []T `json:"resources"`
	Offset    int `json:"offset"`
}

// Deployments lists every deployment whose name contains nameContains
// ("" for all), following the pages.
func (c *Client) Deployments(ctx context.Context, nameContains string) ([]Deployment, error) {
	var out []Deployment
	for offset := 0; ; {
		q := url.Values{"limit": {"100"}, "offset": {fmt.Sprint(offset)}}
		if nameContains != "" {
			q.Set("name_contains", nameContains)
		}
		var p page[Deployment]
		if err := c.Do(ctx, http.MethodGet, "/v2/deployments?"+q.Encode(), nil, &p); err != nil {
			return nil, err
		}
		out = append(out, p.Resources...)
		if len(p.Resources) < 100 || p.Offset <= offset {
			return out, nil
		}
		offset = p.Offset
	}
}

// Deployment fetches one deployment by id.
func (c *Client) Deployment(ctx context.Context, id string) (*Deployment, error) {
	var d Deployment
	if err := c.Do(ctx, http.MethodGet, "/v2/deployments/"+url.PathEscape(id), nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// FindDeployment resolves a name (exact match among name_contains
// results) or an id. It returns nil, nil when no deployment has that name.
func (c *Client) FindDeployment(ctx context.Context, nameOrID string) (*Deployment, error) {
	if _, err := uuid.Parse(nameOrID); err == nil {
		d, err := c.Deployment(ctx, nameOrID)
		var ae *APIError
		if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			return nil, nil
		}
		return d, err
	}
	all, err := c.Deployments(ctx, nameOrID)
	if err != nil {
		return nil, err
	}
	for i := range all {
		if all[i].Name == nameOrID {
			return &all[i], nil
		}
	}
	return nil, nil
}

// Revisions lists a deployment's revisions, newest first.
func (c *Client) Revisions(ctx context.Context, depID string) ([]Revision, error) {
	var out []Revision
	for offset := 0; ; {
		var p page[Revision]
		path := fmt.Sprintf("/v2/deployments/%s/revisions?limit=100&offset=%d", url.PathEscape(depID), offset)
		if err := c.Do(ctx, http.MethodGet, path, nil, &p); err != nil {
			return nil, err
		}
		out = append(out, p.Resources...)
		if len(p.Resources) < 100 || p.Offset <= offset {
			return out, nil
		}
		offset = p.Offset
	}
}

// Revision fetches one revision.
func (c *Client) Revision(ctx context.Context, depID, revID string) (*Revision, error) {
	var r Revision
	path := "/v2/deployments/" + url.PathEscape(depID) + "/revisions/" + url.PathEscape(revID)
	if err := c.Do(ctx, http.MethodGet, path, nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// RevisionLogs reads a revision's whole log and its current status from
// the documented logs endpoint.
func (c *Client) RevisionLogs(ctx context.Context, depID, revID string) ([]LogEntry, string, error) {
	var out struct {
		Logs   []LogEntry `json:"logs"`
		Status string     `json:"status"`
	}
	path := "/v2/deployments/" + url.PathEscape(depID) + "/revisions/" + url.PathEscape(revID) + "/logs"
	if err := c.Do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, "", err
	}
	return out.Logs, out.Status, nil
}
