package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/rs/zerolog"

	"slipway/config"
	"slipway/server/servertest"
)

// TestMetricsControlPlaneInProcess: the control plane served in the test
// process with metrics on (so -race watches the route wrapper): concurrent
// requests count exactly under their route pattern and status class,
// requests no route matches under "unmatched", and the metrics handler
// answers only GET /metrics with the bearer token.
func TestMetricsControlPlaneInProcess(t *testing.T) {
	var app *App
	s := servertest.StartWith(t, map[string]string{"SLIPWAY_METRICS_ADDR": "127.0.0.1:0"},
		servertest.ServeFactory(func(cfg config.Serve, log zerolog.Logger) (servertest.App, error) {
			a, err := New(context.Background(), cfg, log, "dev")
			app = a
			return a, err
		}))
	h := app.MetricsHandler()
	if h == nil {
		t.Fatal("metrics are on but there is no handler")
	}
	raw, err := os.ReadFile(filepath.Join(s.DataDir, "metrics-token"))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(raw))
	for _, c := range []struct {
		method, path, auth string
		want               int
	}{
		{"GET", "/metrics", "", 401},
		{"GET", "/metrics", "Bearer " + token + "x", 401},
		{"GET", "/metrics", s.Key, 401},
		{"POST", "/metrics", "Bearer " + token, 405},
		{"GET", "/v2/deployments", "Bearer " + token, 404},
		{"GET", "/metrics", "Bearer " + token, 200},
	} {
		req := httptest.NewRequest(c.method, c.path, nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != c.want {
			t.Errorf("%s %s with %q: %d, want %d", c.method, c.path, c.auth, w.Code, c.want)
		}
	}
	scrape := func() map[string]*dto.MetricFamily {
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(w.Body)
		if err != nil {
			t.Fatal(err)
		}
		return fams
	}
	const gets, misses = 24, 3
	var wg sync.WaitGroup
	for i := range gets + misses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := "/v2/deployments/00000000-0000-0000-0000-000000000000"
			if i >= gets {
				path = "/no/such/" + strings.Repeat("x", i) // distinct raw paths, one series
			}
			req, _ := http.NewRequest("GET", s.URL+path, nil)
			req.Header.Set("X-Api-Key", s.Key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 404 {
				t.Errorf("GET %s: %d", path, resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	fams := scrape()
	count := func(name string, labels ...string) float64 {
		f := fams[name]
		if f == nil {
			return 0
		}
		sum := 0.0
	next:
		for _, m := range f.Metric {
			have := map[string]string{}
			for _, l := range m.Label {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue next
				}
			}
			if m.Counter != nil {
				sum += m.Counter.GetValue()
			} else if m.Histogram != nil {
				sum += float64(m.Histogram.GetSampleCount())
			}
		}
		return sum
	}
	route := "/v2/deployments/:id"
	for _, c := range []struct {
		what string
		got  float64
		want float64
	}{
		{"GETs of one deployment, 4xx", count("slipway_http_requests_total", "route", route, "method", "GET", "status", "4xx"), gets},
		{"GETs of one deployment, 2xx", count("slipway_http_requests_total", "route", route, "method", "GET", "status", "2xx"), 0},
		{"their latencies", count("slipway_http_request_duration_seconds", "route", route, "method", "GET"), gets},
		{"unmatched", count("slipway_http_requests_total", "route", "unmatched", "status", "4xx"), misses},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	for _, m := range fams["slipway_http_requests_total"].GetMetric() {
		for _, l := range m.Label {
			if l.GetName() == "route" && strings.HasPrefix(l.GetValue(), "/no/such") {
				t.Errorf("a raw path became a label: %s", l.GetValue())
			}
		}
	}
}
