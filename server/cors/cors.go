// Package cors is the cross-origin policy of a deployment's agent API: the
// keys of langgraph.json's http.cors (the reference server's CorsConfig)
// and the server-wide SLIPWAY_CORS_ALLOW_ORIGINS. Slipway answers a
// preflight itself, before authentication: it carries no credential, and
// answering it grants nothing, since the request it announces still needs
// an API key.
package cors

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// Config is langgraph.json's http.cors, with the reference's keys.
type Config struct {
	AllowOrigins     []string `json:"allow_origins,omitempty"`
	AllowMethods     []string `json:"allow_methods,omitempty"`
	AllowHeaders     []string `json:"allow_headers,omitempty"`
	AllowCredentials bool     `json:"allow_credentials,omitempty"`
	AllowOriginRegex string   `json:"allow_origin_regex,omitempty"`
	ExposeHeaders    []string `json:"expose_headers,omitempty"`
	MaxAge           *int     `json:"max_age,omitempty"`
}

// allMethods is what "*" and an absent allow_methods stand for. The
// reference's default (Starlette's) is GET alone, which no SDK client can
// work with; every route of the agent API is meant to be called.
var allMethods = []string{"DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"}

// RequiredHeaders are the request headers the official SDKs send: the API
// key (X-Api-Key), a bearer token, JSON bodies, stream resumption
// (Last-Event-ID), and the SDK's own x-* headers. An allow_headers list
// always includes them: a policy without them lets no SDK through.
var RequiredHeaders = []string{"Accept", "Accept-Language", "Authorization", "Content-Language", "Content-Type",
	"Last-Event-ID", "X-Api-Key", "X-Auth-Scheme", "X-Request-Id", "X-Tenant-Id"}

// DefaultExposeHeaders are the response headers a script may read by
// default: the reference exposes the pagination headers and
// Content-Location (a run's URL); Location is /runs/wait's.
var DefaultExposeHeaders = []string{"Content-Location", "Location", "X-Pagination-Total", "X-Pagination-Next"}

// Policy is a checked Config, ready to answer requests.
type Policy struct {
	anyOrigin   bool
	origins     map[string]bool
	re          *regexp.Regexp
	methods     map[string]bool
	methodList  string
	anyHeader   bool
	headers     map[string]bool
	headerList  string
	credentials bool
	expose      string
	maxAge      string
}

// ErrCredentialsWithAnyOrigin refuses a policy a browser would refuse:
// credentials are never allowed for every origin.
var ErrCredentialsWithAnyOrigin = errors.New(`allow_credentials cannot be true when allow_origins contains "*": a browser refuses credentials for every origin; list the origins`)

// New checks c. A Config allowing no origin gives a nil Policy (no CORS).
func New(c Config) (*Policy, error) {
	p := &Policy{origins: map[string]bool{}, methods: map[string]bool{}, headers: map[string]bool{}, credentials: c.AllowCredentials}
	for _, o := range c.AllowOrigins {
		o = strings.TrimSpace(o)
		switch {
		case o == "*":
			p.anyOrigin = true
		case o == "":
		default:
			if u, err := url.Parse(o); err != nil || u.Scheme == "" || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
				return nil, fmt.Errorf("allow_origins: %q is not an origin such as https://app.example.com (scheme and host, no path)", o)
			}
			p.origins[strings.ToLower(o)] = true
		}
	}
	if c.AllowOriginRegex != "" {
		// Anchored, as the Python reference's fullmatch: an unanchored
		// "https://app\.example\.com" would also allow
		// https://app.example.com.evil.net.
		re, err := regexp.Compile(`^(?:` + c.AllowOriginRegex + `)$`)
		if err != nil {
			return nil, fmt.Errorf("allow_origin_regex: %w", err)
		}
		p.re = re
	}
	if !p.anyOrigin && len(p.origins) == 0 && p.re == nil {
		return nil, nil
	}
	if p.anyOrigin && p.credentials {
		return nil, ErrCredentialsWithAnyOrigin
	}
	methods := c.AllowMethods
	if len(methods) == 0 {
		methods = allMethods
	}
	for _, m := range methods {
		if m == "*" {
			methods = allMethods
			break
		}
	}
	var ml []string
	for _, m := range methods {
		m = strings.ToUpper(strings.TrimSpace(m))
		if !p.methods[m] {
			p.methods[m] = true
			ml = append(ml, m)
		}
	}
	p.methodList = strings.Join(ml, ", ")
	var hl []string
	add := func(h string) {
		h = strings.TrimSpace(h)
		if h == "*" {
			p.anyHeader = true
			return
		}
		if h != "" && !p.headers[strings.ToLower(h)] {
			p.headers[strings.ToLower(h)] = true
			hl = append(hl, h)
		}
	}
	if len(c.AllowHeaders) == 0 {
		p.anyHeader = true
	}
	for _, h := range c.AllowHeaders {
		add(h)
	}
	for _, h := range RequiredHeaders {
		add(h)
	}
	p.headerList = strings.Join(hl, ", ")
	// As the JS reference does, a list of the project's own keeps the
	// headers the SDKs read (a run's Content-Location, the pagination
	// total), so that exposing one more header breaks nothing.
	expose := append([]string(nil), c.ExposeHeaders...)
	for _, d := range DefaultExposeHeaders {
		found := false
		for _, e := range expose {
			found = found || strings.EqualFold(strings.TrimSpace(e), d)
		}
		if !found {
			expose = append(expose, d)
		}
	}
	p.expose = strings.Join(expose, ", ")
	age := 600
	if c.MaxAge != nil {
		if *c.MaxAge < 0 {
			return nil, fmt.Errorf("max_age: %d must not be negative", *c.MaxAge)
		}
		age = *c.MaxAge
	}
	p.maxAge = strconv.Itoa(age)
	return p, nil
}

// FromOrigins is the server-wide policy of SLIPWAY_CORS_ALLOW_ORIGINS:
// those origins, every method, the SDK's headers, no credentials (the
// SDKs authenticate with X-Api-Key, not cookies).
func FromOrigins(origins []string) (*Policy, error) {
	return New(Config{AllowOrigins: origins})
}

// Allows reports whether origin may call.
func (p *Policy) Allows(origin string) bool {
	if p == nil || origin == "" {
		return false
	}
	return p.anyOrigin || p.origins[strings.ToLower(origin)] || (p.re != nil && p.re.MatchString(origin))
}

// IsPreflight reports a CORS preflight: OPTIONS with Origin and
// Access-Control-Request-Method.
func IsPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != ""
}

// Preflight answers a preflight: 204 with the grant when the origin,
// method and headers are allowed; otherwise 403 without any
// Access-Control-* header, so the browser blocks the request it announced.
// It never reaches the deployment.
func (p *Policy) Preflight(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Add("Vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers, Access-Control-Request-Private-Network")
	origin := r.Header.Get("Origin")
	if !p.Allows(origin) || !p.methods[strings.ToUpper(r.Header.Get("Access-Control-Request-Method"))] || !p.headersAllowed(r.Header.Get("Access-Control-Request-Headers")) {
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"detail":"Cross-origin request not allowed."}` + "\n"))
		return
	}
	p.allowOrigin(h, origin)
	h.Set("Access-Control-Allow-Methods", p.methodList)
	if req := r.Header.Get("Access-Control-Request-Headers"); p.anyHeader && req != "" {
		h.Set("Access-Control-Allow-Headers", req)
	} else if p.headerList != "" {
		h.Set("Access-Control-Allow-Headers", p.headerList)
	}
	h.Set("Access-Control-Max-Age", p.maxAge)
	// Private Network Access: Chromium asks before a public page (Studio
	// on https://smith.langchain.com) calls a private or loopback address;
	// an origin the operator listed may, as the reference dev server's
	// private-network middleware allows.
	if strings.EqualFold(r.Header.Get("Access-Control-Request-Private-Network"), "true") {
		h.Set("Access-Control-Allow-Private-Network", "true")
	}
	w.WriteHeader(http.StatusNoContent)
}

func (p *Policy) headersAllowed(list string) bool {
	if p.anyHeader {
		return true
	}
	for _, name := range strings.Split(list, ",") {
		if name = strings.ToLower(strings.TrimSpace(name)); name != "" && !p.headers[name] {
			return false
		}
	}
	return true
}

// Decorate adds the grant for an actual (not preflight) request's
// response: Access-Control-Allow-Origin naming the request's origin when
// it is allowed, the exposed headers, and Vary: Origin in every case (the
// answer depends on it, so a cache must not reuse it for another origin).
func (p *Policy) Decorate(h http.Header, r *http.Request) {
	h.Add("Vary", "Origin")
	origin := r.Header.Get("Origin")
	if !p.Allows(origin) {
		return
	}
	p.allowOrigin(h, origin)
	h.Set("Access-Control-Expose-Headers", p.expose)
}

// allowOrigin names the origin itself rather than "*": a response may
// then vary by origin, and credentials, when allowed, need it.
func (p *Policy) allowOrigin(h http.Header, origin string) {
	h.Set("Access-Control-Allow-Origin", origin)
	if p.credentials {
		h.Set("Access-Control-Allow-Credentials", "true")
	}
}

// StripGrant removes the Access-Control-* headers of a response Slipway
// decorates itself (the agent's own would duplicate or widen them).
func StripGrant(h http.Header) {
	for k := range h {
		if strings.HasPrefix(http.CanonicalHeaderKey(k), "Access-Control-") {
			h.Del(k)
		}
	}
}

// Middleware applies p to h: preflights answered from p alone, actual
// requests' answers decorated. A nil p leaves h alone. The agent wraps
// its API with the deployment's http.cors this way, ahead of its custom
// routes, as the reference's middleware does.
func Middleware(p *Policy, h http.Handler) http.Handler {
	if p == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if IsPreflight(r) {
			p.Preflight(w, r)
			return
		}
		if r.Header.Get("Origin") != "" {
			p.Decorate(w.Header(), r)
		}
		h.ServeHTTP(w, r)
	})
}
