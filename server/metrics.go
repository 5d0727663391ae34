package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"slipway/config"
	"slipway/server/controlplane"
	"slipway/server/httpx"
)

// metrics is the control plane's Prometheus registry: one per App (tests
// run several control planes in one process, so nothing goes to the
// global default registry). A nil *metrics records nothing.
type metrics struct {
	reg   *prometheus.Registry
	token string // the bearer token every scrape must send

	requests *prometheus.CounterVec   // route, method, status
	latency  *prometheus.HistogramVec // route, method
	proxied  *prometheus.CounterVec   // deployment_id, status
	proxyLat *prometheus.HistogramVec // deployment_id
	audit    prometheus.Counter
	cp       *controlplane.Metrics

	// byDeployment caches each deployment's proxy series: the hot path
	// looks them up in a sync.Map, without building a label map.
	byDeployment sync.Map // deployment id → *seriesSet

	// agents relays every serving agent's own /metrics (metrics_agents.go).
	agents *agentGatherer
}

// latencyBuckets suit API calls (milliseconds) up to proxied runs and
// streams (minutes).
var latencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// statusClasses label responses by class: a bounded set, so every
// route's series can be cached up front. Index: status/100 (0: none).
var statusClasses = [6]string{"5xx", "1xx", "2xx", "3xx", "4xx", "5xx"}

func newMetrics(token string) *metrics {
	m := &metrics{reg: prometheus.NewRegistry(), token: token}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "slipway_http_requests_total",
		Help: "Control-plane HTTP requests by route pattern, method and status class."}, []string{"route", "method", "status"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "slipway_http_request_duration_seconds",
		Help: "Control-plane HTTP request latency by route pattern and method.", Buckets: latencyBuckets}, []string{"route", "method"})
	m.proxied = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "slipway_proxy_requests_total",
		Help: "Requests relayed to a deployment's agent, by deployment id and status class."}, []string{"deployment_id", "status"})
	m.proxyLat = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "slipway_proxy_request_duration_seconds",
		Help: "Latency of requests relayed to a deployment's agent (a stream's whole life), by deployment id.", Buckets: latencyBuckets},
		[]string{"deployment_id"})
	m.audit = prometheus.NewCounter(prometheus.CounterOpts{Name: "slipway_audit_events_appended_total",
		Help: "Events committed to the audit chains."})
	m.reg.MustRegister(m.requests, m.latency, m.proxied, m.proxyLat, m.audit)
	m.cp = controlplane.NewMetrics(m.reg)
	return m
}

// seriesSet is one label set's request counters by status class and its
// latency histogram, created on first use (a route never called exposes
// no series).
type seriesSet struct {
	counters [len(statusClasses)]atomic.Pointer[prometheus.Counter]
	vec      *prometheus.CounterVec
	labels   []string // without the status
	obs      prometheus.Observer
}

func newSeriesSet(vec *prometheus.CounterVec, hist *prometheus.HistogramVec, labels ...string) *seriesSet {
	return &seriesSet{vec: vec, labels: labels, obs: hist.WithLabelValues(labels...)}
}

func (s *seriesSet) observe(status int, d time.Duration) {
	i := status / 100
	if i < 1 || i >= len(statusClasses) {
		i = 0
	}
	c := s.counters[i].Load()
	if c == nil {
		n := s.vec.WithLabelValues(append(append([]string(nil), s.labels...), statusClasses[i])...)
		c = &n
		s.counters[i].Store(c)
	}
	(*c).Inc()
	s.obs.Observe(d.Seconds())
}

// route wraps a route's handler to count and time its requests under its
// pattern (httpx.Router.Wrap). Both API prefixes keep their own pattern.
func (m *metrics) route(method, path string, h httprouter.Handle) httprouter.Handle {
	var (
		once sync.Once
		set  *seriesSet
	)
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		once.Do(func() { set = newSeriesSet(m.requests, m.latency, path, method) })
		start := time.Now()
		sw := &httpx.StatusRecorder{ResponseWriter: w}
		defer func() {
			if rec := recover(); rec != nil {
				// Chain answers 500 (or breaks the connection).
				set.observe(http.StatusInternalServerError, time.Since(start))
				panic(rec)
			}
			set.observe(sw.Code(), time.Since(start))
		}()
		h(sw, r, ps)
	}
}

// unmatched counts the requests no route matched (404, 405) under one
// label, so that scanning for paths cannot grow the series.
func (m *metrics) unmatched(h http.Handler) http.Handler {
	set := newSeriesSet(m.requests, m.latency, "unmatched", "any")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &httpx.StatusRecorder{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		set.observe(sw.Code(), time.Since(start))
	})
}

// proxy is the deployment's proxy series.
func (m *metrics) proxy(dep string) *seriesSet {
	if s, ok := m.byDeployment.Load(dep); ok {
		return s.(*seriesSet)
	}
	s, _ := m.byDeployment.LoadOrStore(dep, newSeriesSet(m.proxied, m.proxyLat, dep))
	return s.(*seriesSet)
}

// observeProxy wraps a relayed request to count it for its deployment;
// with metrics off it returns w and a no-op.
func (m *metrics) observeProxy(w http.ResponseWriter, dep string) (http.ResponseWriter, func()) {
	if m == nil {
		return w, func() {}
	}
	set, start := m.proxy(dep), time.Now()
	sw := &httpx.StatusRecorder{ResponseWriter: w}
	return sw, func() { set.observe(sw.Code(), time.Since(start)) }
}

// handler serves the exposition: the control plane's registry and every
// serving agent's metrics, to a scrape that carries the token.
func (m *metrics) handler() http.Handler {
	gather := prometheus.Gatherers{m.reg, m.agents}
	h := promhttp.HandlerFor(gather, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	want := []byte("Bearer " + m.token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			httpx.WriteJSON(w, http.StatusNotFound, map[string]any{"detail": "Not Found"})
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			httpx.WriteJSON(w, http.StatusMethodNotAllowed, map[string]any{"detail": "Method Not Allowed"})
			return
		}
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="slipway-metrics"`)
			httpx.WriteJSON(w, http.StatusUnauthorized, map[string]any{"detail": "A metrics scrape needs the bearer token of SLIPWAY_METRICS_TOKEN_FILE."})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// metricsToken is the bearer token scrapes must send: SLIPWAY_METRICS_TOKEN_FILE's
// content, or the one kept in <data dir>/metrics-token (0600), made on
// first start.
func metricsToken(cfg config.Serve) (string, error) {
	if cfg.Metrics.TokenFile != "" {
		b, err := os.ReadFile(cfg.Metrics.TokenFile)
		if err != nil {
			return "", fmt.Errorf("SLIPWAY_METRICS_TOKEN_FILE: %w", err)
		}
		t := strings.TrimSpace(string(b))
		if len(t) < 16 {
			return "", errors.New("SLIPWAY_METRICS_TOKEN_FILE: the token must be at least 16 characters")
		}
		return t, nil
	}
	path := filepath.Join(cfg.DataDir, "metrics-token")
	b, err := os.ReadFile(path)
	if err == nil && len(strings.TrimSpace(string(b))) >= 16 {
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read the metrics token: %w", err)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("make the metrics token: %w", err)
	}
	t := hex.EncodeToString(raw[:])
	if err := os.WriteFile(path, []byte(t+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write the metrics token: %w", err)
	}
	return t, nil
}

// listenMetrics serves h on SLIPWAY_METRICS_ADDR; stop shuts it down.
func listenMetrics(ctx context.Context, addr string, h http.Handler) (stop func(context.Context), bound string, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("listen on %s (SLIPWAY_METRICS_ADDR): %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() { _ = srv.Serve(ln) }()
	return func(c context.Context) { _ = srv.Shutdown(c) }, ln.Addr().String(), nil
}
