package server

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkTracesOverhead measures what tracing costs, side by side in one
// invocation: off, on (every request sampled) and on with 1% of traces
// sampled (OTEL_TRACES_SAMPLER=parentbased_traceidratio, ARG 0.01),
// exporting to an OTLP receiver that discards what it gets: the control plane's GET /v2/deployments/{id} (in-process
// App, fake runtime, 32 concurrent clients over loopback), and an agent's
// runs (in-process API and engine, echo graph; POST /runs/wait, a
// stateless run, from 16 clients). The variants alternate in short rounds,
// so a change in the machine's load touches both alike. Reproduce:
//
//	go test -run '^$' -bench TracesOverhead -benchtime 1x ./server/
//
// SLIPWAY_BENCH_ROUNDS (default 6) and SLIPWAY_BENCH_ROUND (default 2s)
// set the rounds.
func BenchmarkTracesOverhead(b *testing.B) {
	rounds, round := benchRounds(b, 6)
	var exported atomic.Int64
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		exported.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer sink.Close()
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128, MaxIdleConns: 256}}
	do := func(method, url, key string, body []byte) error {
		req, _ := http.NewRequest(method, url, bytes.NewReader(body))
		if key != "" {
			req.Header.Set("X-Api-Key", key)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("%s %s: %d", method, url, resp.StatusCode)
		}
		return nil
	}
	var gets, runs [3]func() error
	for i := range 3 {
		switch i {
		case 1:
			b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", sink.URL)
		case 2:
			b.Setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
			b.Setenv("OTEL_TRACES_SAMPLER_ARG", "0.01")
		}
		s := startApp(b, map[string]string{"SLIPWAY_LOG_LEVEL": "warn"})
		d := s.Do("POST", "/v2/deployments", map[string]any{"name": "bench", "source": "external_docker",
			"source_config": map[string]any{}, "source_revision_config": map[string]any{"image_uri": "http://127.0.0.1:9"}, "secrets": []any{}})
		if d.Status != 201 {
			b.Fatalf("create: %d %s", d.Status, d.Body)
		}
		url, key := s.URL+"/v2/deployments/"+d.Map()["id"].(string), s.Key
		gets[i] = func() error { return do("GET", url, key, nil) }
		agentURL, _ := startTracedAgent(b)
		run := []byte(`{"assistant_id":"echo","input":{"messages":[{"role":"user","content":"hi"}]}}`)
		runs[i] = func() error { return do("POST", agentURL+"/runs/wait", "", run) }
	}
	measure := func(op func() error, conc int) float64 {
		var n atomic.Int64
		var failed atomic.Value
		stop := time.Now().Add(round)
		var wg sync.WaitGroup
		for range conc {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					if err := op(); err != nil {
						failed.Store(err)
						return
					}
					n.Add(1)
				}
			}()
		}
		wg.Wait()
		if err, _ := failed.Load().(error); err != nil {
			b.Fatal(err)
		}
		return float64(n.Load()) / round.Seconds()
	}
	var get, run [3]float64
	for range rounds {
		for i := range 3 {
			get[i] += measure(gets[i], 32) / float64(rounds)
			run[i] += measure(runs[i], 16) / float64(rounds)
		}
	}
	if exported.Load() == 0 {
		b.Fatal("tracing on exported nothing")
	}
	b.ReportMetric(get[0], "get-off-req/s")
	b.ReportMetric(get[1], "get-on-req/s")
	b.ReportMetric(100*(1-get[1]/get[0]), "get-slower-%")
	b.ReportMetric(get[2], "get-1%-req/s")
	b.ReportMetric(100*(1-get[2]/get[0]), "get-1%-slower-%")
	b.ReportMetric(run[0], "runs-off/s")
	b.ReportMetric(run[1], "runs-on/s")
	b.ReportMetric(100*(1-run[1]/run[0]), "runs-slower-%")
	b.ReportMetric(run[2], "runs-1%/s")
	b.ReportMetric(100*(1-run[2]/run[0]), "runs-1%-slower-%")
}
