package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/rs/zerolog"

	"slipway/config"
	"slipway/server/controlplane"
	"slipway/server/httpx"
)

// The agents origin (SLIPWAY_AGENTS_URL). Deployments' agents are served
// at /agents/{name}/... on an origin of their own, so that nothing a
// deployment answers — a page, a script, a cookie — lands on the origin
// the dashboard and the API live on:
//   - on the agents origin only /agents/{name}/... (and /ok) is served,
//     authenticated by API keys and tokens alone: the dashboard's cookies
//     are removed before authentication, since the origin may share the
//     dashboard's host (another port) and so its cookie jar;
//   - on the dashboard's origin a browser navigation (or any request of a
//     page element: Sec-Fetch-Dest other than empty) to /agents/... is
//     redirected there (307); requests of scripts (the dashboard's
//     agent explorer, clients still using the old URL) are still served,
//     and none of their Set-Cookie headers reaches the browser;
//   - each deployment's url names the agents origin.
//
// Requests reach the agents origin by their Host header (a TLS proxy in
// front sends both host names to SLIPWAY_ADDR) or on SLIPWAY_AGENTS_ADDR,
// a listener of its own.

// agentsHost reports whether r was sent to the agents origin's host.
func (a *app) agentsHost(r *http.Request) bool {
	if a.agentsURL == nil {
		return false
	}
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil {
		host, port = r.Host, ""
	}
	u := &url.URL{Scheme: a.agentsURL.Scheme, Host: host}
	if port != "" {
		u.Host = net.JoinHostPort(host, port)
	}
	return config.SameOrigin(u, a.agentsURL)
}

// agentsOrigin serves the agents origin: serve (the proxy) at
// /agents/{name}/..., the deployments' UI files, /ok, and 404 elsewhere.
func (a *app) agentsOrigin(serve httprouter.Handle, uiAssets func(interface {
	Handle(string, string, httprouter.Handle)
})) http.Handler {
	rt := httpx.NewRouter()
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"} {
		rt.Handle(m, "/agents/:name/*path", a.docsToPublic(serve))
	}
	uiAssets(rt) // a deployment's generative UI files, public (proxy_ui.go)
	rt.GET("/ok", a.ok)
	rt.NotFound = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteJSON(w, http.StatusNotFound, map[string]any{"detail": "Not Found: this origin serves deployments' agents only, at /agents/{name}/."})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The dashboard's cookies are no credential here, whoever set them.
		stripDashboardCookies(r.Header)
		r = r.WithContext(context.WithValue(r.Context(), agentsOriginKey{}, true))
		rt.ServeHTTP(w, r)
	})
}

// pageRequest reports whether the browser sent r to load a document or
// an element of a page, not for a script's fetch: Sec-Fetch-Mode navigate
// or a Sec-Fetch-Dest other than empty. Clients that send neither (the
// SDKs, the CLI, curl) are scripts.
func pageRequest(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Mode") {
	case "navigate", "nested-navigate":
		return true
	}
	dest := r.Header.Get("Sec-Fetch-Dest")
	return dest != "" && dest != "empty"
}

// agentsOnDashboard wraps the dashboard origin's /agents/... routes: with
// an agents origin, a page request there is redirected (307, method and
// body kept) to the same path on the agents origin, before any
// authentication, so a deployment's page never renders on the dashboard's
// origin. The redirect is temporary and never stored: the same URL
// fetched by a script is served here, and a browser would otherwise
// cache a permanent redirect and follow it for the fetch too.
func (a *app) agentsOnDashboard(h httprouter.Handle) httprouter.Handle {
	if a.agentsURL == nil {
		return h
	}
	base := strings.TrimRight(a.agentsURL.String(), "/")
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		// A deployment's /docs is Slipway's own page (proxy_docs.go).
		if pageRequest(r) && !slipwayServed(ps.ByName("path")) {
			w.Header().Set("Cache-Control", "no-store")
			w.Header().Set("Vary", "Sec-Fetch-Dest, Sec-Fetch-Mode")
			http.Redirect(w, r, base+r.URL.RequestURI(), http.StatusTemporaryRedirect)
			return
		}
		h(w, r, ps)
	}
}

// listenAgents serves the agents origin on SLIPWAY_AGENTS_ADDR, when set,
// until the returned stop is called.
func listenAgents(cfg config.Serve, h http.Handler, log zerolog.Logger, base func(net.Listener) context.Context) (stop func(context.Context), err error) {
	if cfg.AgentsAddr == "" {
		return func(context.Context) {}, nil
	}
	ln, err := net.Listen("tcp", cfg.AgentsAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (SLIPWAY_AGENTS_ADDR): %w", cfg.AgentsAddr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second, BaseContext: base}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("agents listener stopped")
		}
	}()
	log.Info().Str("addr", ln.Addr().String()).Str("agents_url", cfg.AgentsURL).Msg("serving agents on their own origin")
	return func(ctx context.Context) {
		if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn().Err(err).Msg("agents listener did not shut down cleanly")
		}
	}, nil
}

// ownHosts are the host names that reach Slipway itself, which no
// custom_url may claim (controlplane.Service.OwnHosts): the public URL's
// and the agents URL's hosts, the listen addresses' hosts and, for a
// listener on every address, the machine's name and addresses.
func ownHosts(cfg config.Serve) []string {
	var out []string
	add := func(h string) {
		if k := controlplane.CustomHost(h); k != "" {
			out = append(out, k)
		}
	}
	add(cfg.PublicURL)
	add(cfg.AgentsURL)
	wildcard := false
	for _, addr := range []string{cfg.Addr, cfg.AgentsAddr} {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			continue
		}
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			wildcard = true
			continue
		}
		add(host)
	}
	if wildcard {
		if name, err := os.Hostname(); err == nil {
			add(name)
		}
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, ad := range addrs {
				if n, ok := ad.(*net.IPNet); ok {
					add("http://" + net.JoinHostPort(n.IP.String(), "80"))
				}
			}
		}
	}
	return out
}
