package processtest_test

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"slipway/server/servertest"
)

// These benchmarks measure a real `slipway serve` process over loopback
// HTTP, as a user's client sees it. Reproduce with:
//
//	go test -run '^$' -bench . -benchtime 5s ./server/processtest/
func benchClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}}
}

func do(b *testing.B, c *http.Client, method, url, key string, body []byte, want int) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("X-Api-Key", key)
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		b.Fatalf("%s %s: %d", method, url, resp.StatusCode)
	}
}

// shared starts one server per benchmark, not one per b.N calibration round.
var (
	sharedOnce sync.Once
	sharedSrv  *servertest.Server
)

func shared(b *testing.B) *servertest.Server {
	sharedOnce.Do(func() {
		// The access log stays at its production level (info) while measuring.
		sharedSrv = servertest.StartUnmanaged(b, nil)
	})
	return sharedSrv
}

func TestMain(m *testing.M) {
	flag.Parse()
	raiseParallel()
	code := m.Run()
	if sharedSrv != nil {
		sharedSrv.Stop()
		os.RemoveAll(sharedSrv.DataDir)
	}
	os.Exit(code)
}

func BenchmarkGetDeployment(b *testing.B) {
	s := shared(b)
	r := s.Do("POST", "/v2/deployments", map[string]any{"name": fmt.Sprintf("bench-get-%d", b.N), "source": "internal_docker", "source_config": map[string]any{},
		"source_revision_config": map[string]any{"image_uri": "img:1"}, "secrets": []any{}})
	url := s.URL + "/v2/deployments/" + r.Map()["id"].(string)
	c := benchClient()
	b.SetParallelism(16)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			do(b, c, "GET", url, s.Key, nil, 200)
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}

// postSeq names deployments uniquely across calibration rounds.
var postSeq atomic.Int64

func BenchmarkPostDeployment(b *testing.B) {
	s := shared(b)
	c := benchClient()
	b.SetParallelism(16)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			body := fmt.Appendf(nil, `{"name":"bench-post-%d","source":"internal_docker","source_config":{},"source_revision_config":{"image_uri":"img:1"},"secrets":[{"name":"K","value":"v"}]}`, postSeq.Add(1))
			do(b, c, "POST", s.URL+"/v2/deployments", s.Key, body, 201)
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}

// BenchmarkColdStart measures exec of `slipway serve` on an existing data
// directory until the first request is served, and the idle RSS after it.
func BenchmarkColdStart(b *testing.B) {
	bin := servertest.Binary(b)
	dir := b.TempDir()
	addr := servertest.FreeAddr(b)
	env := append(os.Environ(), "SLIPWAY_DATA_DIR="+dir, "SLIPWAY_ADDR="+addr, "SLIPWAY_LOG_LEVEL=warn", "SLIPWAY_RUNTIME=fake")
	var total time.Duration
	var rss int64
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(bin, "serve")
		cmd.Env = env
		start := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		for {
			resp, err := http.Get("http://" + addr + "/ok")
			if err == nil {
				resp.Body.Close()
				break
			}
			time.Sleep(time.Millisecond)
		}
		total += time.Since(start)
		time.Sleep(500 * time.Millisecond)
		if raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)); err == nil {
			var kb int64
			for _, line := range bytes.Split(raw, []byte("\n")) {
				if bytes.HasPrefix(line, []byte("VmRSS:")) {
					fmt.Sscanf(string(bytes.TrimSpace(line[6:])), "%d kB", &kb)
				}
			}
			rss = kb << 10
		}
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/start")
	b.ReportMetric(float64(rss)/(1<<20), "idle-RSS-MB")
	if st, err := os.Stat(bin); err == nil {
		b.ReportMetric(float64(st.Size())/(1<<20), "binary-MB")
	}
}
