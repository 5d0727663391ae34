package agentapi

import (
	"net/http"
	"slipway/server/httpx"
	"sync/atomic"

	"github.com/julienschmidt/httprouter"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// withMetrics serves the engine's metrics at GET /metrics, before the
// project's custom routes and whatever http.disable_* turns off: the
// control plane relays them (the agent answers only Slipway's token).
// Without metrics it returns h.
func (a *API) withMetrics(h http.Handler) http.Handler {
	m := a.Engine.Metrics
	if m == nil {
		return h
	}
	expo := promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			expo.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// statusClasses label responses by class (index status/100; 0: none),
// which bounds the series per route.
var statusClasses = [6]string{"5xx", "1xx", "2xx", "3xx", "4xx", "5xx"}

// countRequests wraps each route to count its requests in
// lg_api_http_requests_total under its pattern. A route's series are
// resolved on first use and kept: no label lookup per request. The
// reference leaves out its meta routes; so does this.
func countRequests(vec *prometheus.CounterVec) func(method, path string, h httprouter.Handle) httprouter.Handle {
	return func(method, path string, h httprouter.Handle) httprouter.Handle {
		switch path {
		case "/ok", "/info", "/metrics", "/docs", "/openapi.json":
			return h
		}
		var byClass [len(statusClasses)]atomic.Pointer[prometheus.Counter]
		return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
			sw := &httpx.StatusRecorder{ResponseWriter: w}
			defer func() {
				i := sw.Code() / 100
				if rec := recover(); rec != nil {
					i = 5
					defer panic(rec)
				}
				if i < 1 || i >= len(statusClasses) {
					i = 0
				}
				c := byClass[i].Load()
				if c == nil {
					n := vec.WithLabelValues(method, path, statusClasses[i])
					c = &n
					byClass[i].Store(c)
				}
				(*c).Inc()
			}()
			h(sw, r, ps)
		}
	}
}
