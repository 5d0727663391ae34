package server

import (
	"net/http"
	"strings"

	"slipway/server/auth"
)

// A deployment's answers pass through Slipway on its own host (and on the
// agents origin, which may share the host's cookies: browsers scope
// cookies by host, not port), so its Set-Cookie headers reach the cookie
// jar the dashboard's cookies live in. CSP sandbox stops a deployment's
// scripts, not its headers: without this filter a custom route answering
// "Set-Cookie: slipway_session=…; Path=/" would replace the signed-in
// user's session and CSRF cookies. So every Set-Cookie that names one of
// Slipway's cookies, under any spelling a browser could store it by, is
// dropped from every proxied answer (on custom_url hosts too: a
// Domain=parent cookie set there would reach the dashboard's host).

// setCookieName is the name a browser stores a Set-Cookie line's cookie
// under (RFC 6265bis 5.6): the name-value pair ends at the first ';', the
// name at its first '=', both trimmed of spaces and tabs. A pair without
// '=', or with an empty name, makes a nameless cookie that is sent as its
// bare value: "=slipway_session=x" arrives as "slipway_session=x", which
// a server parses as that cookie, so the value's own name counts then.
func setCookieName(line string) string {
	pair, _, _ := strings.Cut(line, ";")
	name, value, ok := strings.Cut(pair, "=")
	name = strings.Trim(name, " \t")
	if !ok {
		return name // no '=': a nameless cookie whose value is this
	}
	if name == "" {
		name, _, _ = strings.Cut(value, "=")
		return strings.Trim(name, " \t")
	}
	return name
}

// dropSetCookies removes from h the Set-Cookie lines that name a Slipway
// cookie (auth.IsSlipwayCookie), or every one when all is set, and
// returns the names it removed.
func dropSetCookies(h http.Header, all bool) (dropped []string) {
	lines := h.Values("Set-Cookie")
	if len(lines) == 0 {
		return nil
	}
	keep := lines[:0:0]
	for _, line := range lines {
		if name := setCookieName(line); all || auth.IsSlipwayCookie(name) {
			dropped = append(dropped, name)
			continue
		}
		keep = append(keep, line)
	}
	if len(dropped) == 0 {
		return nil
	}
	h.Del("Set-Cookie")
	for _, line := range keep {
		h.Add("Set-Cookie", line)
	}
	return dropped
}

// filterSetCookies applies dropSetCookies to an agent's answer for t, and
// says so at debug level once per deployment (a deployment's code may do
// it on every request).
func (p *proxy) filterSetCookies(h http.Header, t target) {
	all := t.dashboardOrigin && p.agentsOrigin
	dropped := dropSetCookies(h, all)
	if len(dropped) == 0 {
		return
	}
	if _, seen := p.cookieLogged.LoadOrStore(t.dep, true); seen {
		return
	}
	why := "they name Slipway's cookies"
	if all {
		why = "agents are served on SLIPWAY_AGENTS_URL: the dashboard's origin keeps no cookie of a deployment"
	}
	p.log.Debug().Str("deployment_id", t.dep).Strs("cookies", dropped).
		Msg("dropped Set-Cookie headers of the deployment's answer (" + why + "); said once per deployment")
}

// informationalFilter applies the filter to 1xx answers too: the reverse
// proxy copies their headers to the client before the final answer, which
// ModifyResponse handles.
type informationalFilter struct {
	http.ResponseWriter
	filter func(http.Header)
}

func (w informationalFilter) WriteHeader(code int) {
	if code >= 100 && code < 200 {
		w.filter(w.Header())
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (flushes, full duplex).
func (w informationalFilter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
