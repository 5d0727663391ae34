package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/rs/zerolog"

	"slipway/oteltrace"
	"slipway/runtime"
	"slipway/server/auth"
	"slipway/server/controlplane"
	"slipway/server/cors"
	"slipway/server/httpx"
)

// proxy serves each deployment's agent API at /agents/{name}/...: the
// caller needs an API key of the deployment's workspace; every Slipway
// credential is removed before the request reaches the agent (see
// stripCredentials); requests wait at the gate while a revision is being
// handed over; SSE responses stream unbuffered.
type proxy struct {
	cp     *controlplane.Service
	driver runtime.Driver
	gate   *runtime.Gate
	// handoverWait bounds how long a request waits for a handover.
	handoverWait time.Duration
	// restartWait bounds how long a request is held while the agent does
	// not accept connections (proxy_hold.go); 0: agentRestartWait.
	restartWait time.Duration

	// agentsOrigin: SLIPWAY_AGENTS_URL is set, so the dashboard's origin
	// serves agents only to scripts (see agentsOnDashboard) and keeps
	// none of their cookies.
	agentsOrigin bool
	log          zerolog.Logger
	// cookieLogged holds the deployments whose dropped Set-Cookie headers
	// were logged (filterSetCookies).
	cookieLogged sync.Map
	// turns spreads requests over a deployment's API replicas
	// (proxy_replicas.go).
	turns replicaTurns
	// unreachable is where dials failed lately: other replicas are
	// taken first (proxy_replicas.go).
	unreachable dialFailures

	// cors is the server-wide cross-origin policy (nil: none); see
	// withCORS.
	cors *cors.Policy

	once sync.Once
	rp   *httputil.ReverseProxy

	// metrics counts relayed requests per deployment (nil: off).
	metrics *metrics
	// otel traces relayed requests (otel.go); nil: off.
	otel *oteltrace.Provider
}

type targetKey struct{}

type target struct {
	dep   string
	base  *url.URL
	token string // the agent's runtime.AgentTokenHeader, if it has one
	path  string
	// keepAuthorization: the Authorization header is not Slipway's and
	// the deployment asked for it.
	keepAuthorization bool
	// sandbox: the request came to an origin that is not the
	// deployment's own (Slipway's host or the agents origin, which every
	// deployment shares), not to its custom_url.
	sandbox bool
	// dashboardOrigin: the request came to Slipway's own host, where the
	// dashboard lives.
	dashboardOrigin bool
	// uiBase is where a browser fetches the deployment's generative UI
	// files (proxy_ui.go), told to the agent in uiBaseHeader.
	uiBase string
	// epoch is the handover epoch the request passed the gate in
	// (runtime.Gate.Pass); see redialTransport.
	epoch uint64
}

// customHostKey marks a request routed by its deployment's custom_url.
type customHostKey struct{}

// agentsOriginKey marks a request that came to SLIPWAY_AGENTS_URL.
type agentsOriginKey struct{}

// agentURL splits a driver's endpoint into the agent's base URL and the
// token it requires (the URL's password, see runtime.Driver.Endpoint).
func agentURL(endpoint string) (*url.URL, string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, "", fmt.Errorf("agent endpoint: %w", err)
	}
	token, _ := u.User.Password()
	u.User = nil
	return u, token, nil
}

// slipwayCredentialHeaders are the request headers Slipway reads to
// authenticate and place a caller (orgapi.Store.Authenticate), and the
// agent token only Slipway may set. The deployment's code is not trusted
// with them: a key or token that reached it could be replayed against
// Slipway's own API.
var slipwayCredentialHeaders = []string{"X-Api-Key", "X-Tenant-Id", "X-Organization-Id", runtime.AgentTokenHeader}

// stripCredentials removes Slipway's credentials from a request bound for
// an agent. Authorization is Slipway's whenever X-Api-Key is absent (the
// bearer token was the credential); otherwise it belongs to the caller and
// the agent, and passes only when the deployment opted in with
// controlplane.AnnotationForwardAuthorization.
func stripCredentials(h http.Header, keepAuthorization bool) {
	for _, k := range slipwayCredentialHeaders {
		h.Del(k)
	}
	if !keepAuthorization {
		h.Del("Authorization")
	}
	stripDashboardCookies(h)
}

// stripDashboardCookies drops the dashboard's cookies (auth.CredentialCookie
// and its siblings, all named slipway_*, with or without the __Host-
// prefix: auth.IsSlipwayCookie) from a request bound for an agent, keeping
// any other cookie: the deployment may set and read its own.
func stripDashboardCookies(h http.Header) {
	lines := h.Values("Cookie")
	if len(lines) == 0 {
		return
	}
	var keep []string
	for _, line := range lines {
		for _, c := range strings.Split(line, ";") {
			if name, _, _ := strings.Cut(strings.TrimSpace(c), "="); name != "" && !auth.IsSlipwayCookie(name) {
				keep = append(keep, strings.TrimSpace(c))
			}
		}
	}
	h.Del("Cookie")
	if len(keep) > 0 {
		h.Set("Cookie", strings.Join(keep, "; "))
	}
}

// modifyResponse drops the Set-Cookie headers an agent may not send
// (filterSetCookies), ends an event stream the agent breaks off with an
// error event (guardEventStream), then sandboxes its documents.
func (p *proxy) modifyResponse(resp *http.Response) error {
	if t, ok := resp.Request.Context().Value(targetKey{}).(target); ok {
		p.filterSetCookies(resp.Header, t)
	}
	traceResponse(resp)
	p.stripAgentCORS(resp)
	guardEventStream(resp)
	return sandboxAgentDocuments(resp)
}

// sandboxAgentDocuments makes whatever page a deployment serves through
// Slipway's own origin run in an opaque origin: the dashboard lives on
// that origin, and a deployment's script must not be able to read its CSRF
// cookie or call the API as the signed-in user. The agents origin is
// shared by every deployment, so there too one deployment's page must not
// reach another's. On its custom_url a deployment has an origin of its
// own, and its pages are left alone.
func sandboxAgentDocuments(resp *http.Response) error {
	if t, ok := resp.Request.Context().Value(targetKey{}).(target); ok && !t.sandbox {
		return nil
	}
	// Added, not set: a policy of the deployment's own still applies.
	resp.Header.Add("Content-Security-Policy", "sandbox")
	return nil
}

// authorizationIsCallers reports whether the Authorization header of an
// authenticated request was left alone by Slipway: it authenticates with
// X-Api-Key when one is sent and only falls back to a bearer token.
func authorizationIsCallers(r *http.Request) bool {
	return r.Header.Get("X-Api-Key") != "" && r.Header.Get("Authorization") != ""
}

// reverseProxy is built once: one keep-alive transport for every agent.
// Server-sent events still stream: ReverseProxy flushes text/event-stream
// responses as they are written.
func (p *proxy) reverseProxy() *httputil.ReverseProxy {
	p.once.Do(func() {
		p.rp = &httputil.ReverseProxy{
			BufferPool: bufferPool{},
			Transport: &redialTransport{p: p,
				base: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second, DisableCompression: true}},
			Rewrite: func(pr *httputil.ProxyRequest) {
				t := pr.In.Context().Value(targetKey{}).(target)
				pr.SetURL(t.base)
				pr.Out.URL.Path = t.path
				pr.Out.URL.RawPath = ""
				stripCredentials(pr.Out.Header, t.keepAuthorization)
				if t.token != "" {
					pr.Out.Header.Set(runtime.AgentTokenHeader, t.token)
				}
				// Where a browser fetches the deployment's UI files
				// (proxy_ui.go); never the caller's value.
				pr.Out.Header.Del(uiBaseHeader)
				if t.uiBase != "" {
					pr.Out.Header.Set(uiBaseHeader, t.uiBase)
				}
				pr.SetXForwarded()
				// The proxy span's context, never the caller's (otel.go).
				p.otel.Inject(pr.Out.Context(), pr.Out.Header)
			},
			ModifyResponse: p.modifyResponse,
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				traceProxyError(r, err)
				if r.Context().Err() != nil {
					return // the client went away; its disconnect reached the agent
				}
				httpx.WriteJSON(w, http.StatusBadGateway, map[string]any{"detail": "The deployment's agent server did not answer: " + err.Error()})
			},
		}
	})
	return p.rp
}

func (p *proxy) serve(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	pr := auth.From(r)
	name := ps.ByName("name")
	dep, ok := p.cp.DeploymentByName(pr.WorkspaceID, name)
	if !ok {
		return httpx.NotFound("Deployment %q not found.", name)
	}
	ctx, cancel := context.WithTimeout(r.Context(), p.handoverWait)
	epoch, err := p.gate.Pass(ctx, dep)
	cancel()
	if err != nil {
		return httpx.Errorf(http.StatusServiceUnavailable, "Deployment %q is switching revisions; try again.", name)
	}
	endpoint, ok := p.endpoint(dep)
	if !ok {
		return httpx.Errorf(http.StatusServiceUnavailable, "Deployment %q has no running revision.", name)
	}
	base, token, err := agentURL(endpoint)
	if err != nil {
		return err
	}
	custom, agents := r.Context().Value(customHostKey{}) != nil, r.Context().Value(agentsOriginKey{}) != nil
	t := target{dep: dep, base: base, token: token, path: "/" + strings.TrimPrefix(ps.ByName("path"), "/"),
		sandbox: !custom, dashboardOrigin: !custom && !agents, uiBase: p.uiAssetBase(dep), epoch: epoch}
	t.keepAuthorization = authorizationIsCallers(r) && p.cp.ForwardsAuthorization(dep)
	if !custom && (r.Method == http.MethodGet || r.Method == http.MethodHead) && slipwayServed(t.path) {
		// Slipway's page and its document, see proxy_docs.go.
		if docsPath(t.path) {
			return p.docs(w, r, t)
		}
		return p.docJSON(w, r, t)
	}
	return p.relay(w, r, t)
}

// relay sends the request on to the agent t names and its answer back.
func (p *proxy) relay(w http.ResponseWriter, r *http.Request, t target) error {
	r = r.WithContext(context.WithValue(r.Context(), targetKey{}, t))
	// Full duplex: by default the server drains and closes a request's
	// body once the response starts, but the transport may still be
	// reading it to send on. It reads once more after the last byte, to
	// check for extra data; when the agent answered first (a quick run's
	// stream), that read hit the closed body, and the transport's failed
	// write closed the connection under the streaming response. The agent
	// decides when it has read enough; Slipway only relays.
	if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
		return fmt.Errorf("relay the request body: %w", err)
	}
	// A full-duplex body left unread (the agent was not reached, or
	// answered without reading it) is drained by the server only after
	// the handler, once it stopped watching the connection: the drain's
	// end of body then starts a read that collides with the next
	// request's, net/http panics and drops the client's kept-alive
	// connection (golang/go#68560). Closing it here drains it while the
	// handler still runs; a transport still sending it then reads a
	// closed body and stops.
	defer r.Body.Close()
	r, span := p.proxySpan(r, t)
	if span != nil {
		defer span.End()
	}
	w, observed := p.metrics.observeProxy(w, t.dep)
	defer observed()
	w = informationalFilter{ResponseWriter: w, filter: func(h http.Header) { p.filterSetCookies(h, t) }}
	p.reverseProxy().ServeHTTP(w, r)
	return nil
}

// bufferPool reuses the proxy's copy buffers; without one, ReverseProxy
// allocates 32 KiB per request.
type bufferPool struct{}

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *copyBuffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { copyBuffers.Put(&b) }
