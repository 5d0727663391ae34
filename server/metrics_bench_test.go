package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/rs/zerolog"

	"slipway/runtime/agent"
	"slipway/runtime/agent/agentapi"
	"slipway/storage"
)

// BenchmarkMetricsOverhead measures what metrics cost, off and on side by
// side in one invocation: the control plane's GET /v2/deployments/{id}
// (in-process App, fake runtime, 32 concurrent clients over loopback), and
// an agent's runs (in-process API and engine, echo graph; each run is POST
// /threads then POST /threads/{id}/runs/wait, from 16 clients). The two
// variants alternate in short rounds, so a change in the machine's load
// touches both alike; it reports each rate and the slowdown with metrics
// on. Reproduce:
//
//	go test -run '^$' -bench MetricsOverhead -benchtime 1x ./server/
//
// SLIPWAY_BENCH_ROUNDS (default 8) and SLIPWAY_BENCH_ROUND (default 2s)
// set the rounds.
func BenchmarkMetricsOverhead(b *testing.B) {
	rounds, round := benchRounds(b, 8)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128, MaxIdleConns: 256}}
	var getOps [2]func() error
	for i, on := range []bool{false, true} {
		env := map[string]string{"SLIPWAY_LOG_LEVEL": "warn"}
		if on {
			env["SLIPWAY_METRICS_ADDR"] = "127.0.0.1:0" // collected; the benchmark scrapes nothing
		}
		s := startApp(b, env)
		d := s.Do("POST", "/v2/deployments", map[string]any{"name": "bench", "source": "external_docker",
			"source_config": map[string]any{}, "source_revision_config": map[string]any{"image_uri": "http://127.0.0.1:9"}, "secrets": []any{}})
		if d.Status != 201 {
			b.Fatalf("create: %d %s", d.Status, d.Body)
		}
		url, key := s.URL+"/v2/deployments/"+d.Map()["id"].(string), s.Key
		getOps[i] = func() error {
			req, _ := http.NewRequest("GET", url, nil)
			req.Header.Set("X-Api-Key", key)
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return &benchError{resp.StatusCode, "GET"}
			}
			return nil
		}
	}
	var runOps [2]func() error
	for i, on := range []bool{false, true} {
		var m *agent.Metrics
		if on {
			m = agent.NewMetrics()
		}
		url := benchAgent(b, m)
		runOps[i] = func() error {
			var th struct {
				ThreadID string `json:"thread_id"`
			}
			if err := benchPost(client, url+"/threads", `{}`, &th); err != nil {
				return err
			}
			return benchPost(client, url+"/threads/"+th.ThreadID+"/runs/wait",
				`{"assistant_id": "echo", "input": {"messages": [{"role": "user", "content": "hi"}]}}`, nil)
		}
	}
	for _, c := range []struct {
		name    string
		clients int
		ops     [2]func() error
		unit    string
	}{{"controlplane_GET", 32, getOps, "req/s"}, {"agent_runs", 16, runOps, "runs/s"}} {
		var count [2]int
		var took [2]time.Duration
		for r := 0; r < rounds; r++ {
			// Each round swaps which variant goes first: the second
			// pays for the first's garbage and warm caches alike.
			for j := range 2 {
				i := j ^ r%2
				n, d, err := benchRound(round, c.clients, c.ops[i])
				if err != nil {
					b.Fatalf("%s: %v", c.name, err)
				}
				count[i] += n
				took[i] += d
			}
		}
		off, on := float64(count[0])/took[0].Seconds(), float64(count[1])/took[1].Seconds()
		b.ReportMetric(off, c.name+"_off_"+c.unit)
		b.ReportMetric(on, c.name+"_on_"+c.unit)
		b.ReportMetric(100*(off-on)/off, c.name+"_slowdown_%")
	}
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		b.Logf("load average at end: %s", strings.TrimSpace(string(load)))
	}
}

// benchRound runs op from clients goroutines for d and returns how many
// completed and how long they took.
func benchRound(d time.Duration, clients int, op func() error) (int, time.Duration, error) {
	var (
		wg    sync.WaitGroup
		total atomic.Int64
		first atomic.Pointer[error]
	)
	start := time.Now()
	deadline := start.Add(d)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if err := op(); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
				total.Add(1)
			}
		}()
	}
	wg.Wait()
	if e := first.Load(); e != nil {
		return 0, 0, *e
	}
	return int(total.Load()), time.Since(start), nil
}

// benchAgent serves an agent API in this process (metrics m, nil: off)
// until the benchmark ends.
func benchAgent(b *testing.B, m *agent.Metrics) string {
	db, err := storage.Open(filepath.Join(b.TempDir(), "agent.db"), time.Second, agent.Migrations)
	if err != nil {
		b.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	eng := &agent.Engine{DB: db, Graphs: map[string]agent.Graph{"echo": agent.Echo{}}, Workers: 16, Timeout: time.Minute,
		Log: zerolog.Nop(), Metrics: m}
	if err := eng.Start(ctx); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer((&agentapi.API{Engine: eng, MaxBody: 1 << 20}).Handler())
	b.Cleanup(func() {
		srv.Close()
		stop()
		eng.Wait()
		db.Close()
	})
	return srv.URL
}

func benchPost(client *http.Client, url, body string, out any) error {
	resp, err := client.Post(url, "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return &benchError{resp.StatusCode, string(b)}
	}
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

type benchError struct {
	status int
	body   string
}

func (e *benchError) Error() string { return http.StatusText(e.status) + ": " + e.body }

// BenchmarkMetricsRouteWrapper is what the metrics add to one request of
// the control plane, without the network and the handler's own work: a
// route's handler called directly, bare and wrapped by metrics.route
// (status recorder, counter, histogram). Reproduce:
//
//	go test -run '^$' -bench MetricsRouteWrapper -benchmem ./server/
func BenchmarkMetricsRouteWrapper(b *testing.B) {
	h := func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) { w.WriteHeader(http.StatusOK) }
	m := newMetrics("unused-token-0123456789")
	for _, c := range []struct {
		name string
		h    httprouter.Handle
	}{{"bare", h}, {"wrapped", m.route("GET", "/v2/deployments/:deployment_id", h)}} {
		b.Run(c.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", "/v2/deployments/x", nil)
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					c.h(w, req, nil)
				}
			})
		})
	}
}

// discardWriter is a ResponseWriter that keeps nothing.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}

// benchRounds is how many rounds of how long a side-by-side benchmark
// alternates its variants (SLIPWAY_BENCH_ROUNDS, default def;
// SLIPWAY_BENCH_ROUND, default 2s); it logs the load average the run
// starts under, for BENCHMARKS.md.
func benchRounds(b *testing.B, def int) (int, time.Duration) {
	rounds, round := def, 2*time.Second
	if v, err := strconv.Atoi(os.Getenv("SLIPWAY_BENCH_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	if v, err := time.ParseDuration(os.Getenv("SLIPWAY_BENCH_ROUND")); err == nil && v > 0 {
		round = v
	}
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		b.Logf("load average at start: %s", strings.TrimSpace(string(load)))
	}
	return rounds, round
}
