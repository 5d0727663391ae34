package processtest_test

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"slipway/server/servertest"
)

// BenchmarkDeploy measures, on each runtime, the time from POST
// /v2/deployments (with its source upload — the echo built-in and a static
// Go command graph — and the PATCH that brings it, as the official client
// does) to the revision reporting DEPLOYED.
//
//	go test -run '^$' -bench 'Deploy|ProxyOverhead' -benchtime 5x ./server/processtest/
func BenchmarkDeploy(b *testing.B) {
	for _, driver := range drivers {
		b.Run(driver, func(b *testing.B) {
			if driver == "docker" {
				engine(b)
			}
			benchmarkDeploy(b, driver)
		})
	}
}

func benchmarkDeploy(b *testing.B, driver string) {
	if driver == "docker" {
		// After the server stopped: its agent base image, and whatever a
		// failed round left.
		defer cleanupInstalls(b, engine(b))
	}
	s := servertest.StartUnmanaged(b, map[string]string{"SLIPWAY_RUNTIME": driver, "SLIPWAY_LOG_LEVEL": "warn"})
	defer s.Stop()
	archive := sourceTarballBytes(appFiles(b, ""))
	var took []time.Duration
	var deps []string
	for i := 0; i < b.N; i++ {
		start := time.Now()
		d := s.Do("POST", "/v2/deployments", map[string]any{"name": fmt.Sprintf("bench-%d-%d", time.Now().UnixNano()%1e6, i),
			"source": "internal_source", "source_config": map[string]any{},
			"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}, "secrets": []any{}})
		dep := d.Map()["id"].(string)
		deps = append(deps, dep)
		up := s.Do("POST", "/v2/deployments/"+dep+"/upload-url", nil).Map()
		req, _ := http.NewRequest("PUT", up["upload_url"].(string), strings.NewReader(string(archive)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("upload: %v", err)
		}
		resp.Body.Close()
		rev := s.Do("PATCH", "/v2/deployments/"+dep, map[string]any{"source_revision_config": map[string]any{
			"source_tarball_path": up["object_path"]}}).Map()["latest_revision_id"].(string)
		for {
			st := s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev, nil).Map()["status"]
			if st == "DEPLOYED" {
				break
			}
			if st == "BUILD_FAILED" || st == "DEPLOY_FAILED" {
				b.Fatalf("revision %v", st)
			}
			time.Sleep(5 * time.Millisecond)
		}
		took = append(took, time.Since(start))
	}
	b.StopTimer()
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "median-ms-to-DEPLOYED")
	// Containers outlive the server: take the deployments down.
	for _, dep := range deps {
		s.Do("DELETE", "/v2/deployments/"+dep, nil)
	}
	for _, dep := range deps {
		for deadline := time.Now().Add(30 * time.Second); s.Do("GET", "/v2/deployments/"+dep, nil).Status != 404 && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func benchTarball() []byte {
	return sourceTarballBytes(map[string]string{"langgraph.json": `{"graphs": {"agent": {"builtin": "echo"}}}`})
}

// BenchmarkProxyOverhead calls GET /ok of a deployed agent directly and
// through /agents/{name}/ in the same run and reports the difference.
func BenchmarkProxyOverhead(b *testing.B) {
	s := servertest.StartUnmanaged(b, map[string]string{"SLIPWAY_RUNTIME": "process", "SLIPWAY_LOG_LEVEL": "warn"})
	defer s.Stop()
	name := fmt.Sprintf("proxied-%d", time.Now().UnixNano()%1e6)
	dep := s.Do("POST", "/v2/deployments", map[string]any{"name": name, "source": "internal_source", "source_config": map[string]any{},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}, "secrets": []any{}}).Map()["id"].(string)
	up := s.Do("POST", "/v2/deployments/"+dep+"/upload-url", nil).Map()
	req, _ := http.NewRequest("PUT", up["upload_url"].(string), strings.NewReader(string(benchTarball())))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		b.Fatal("upload failed")
	}
	s.Do("PATCH", "/v2/deployments/"+dep, map[string]any{"source_revision_config": map[string]any{"source_tarball_path": up["object_path"]}})
	var direct string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		logs := string(s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+
			s.Do("GET", "/v2/deployments/"+dep, nil).Map()["latest_revision_id"].(string)+"/logs", nil).Body)
		if i := strings.Index(logs, "is serving on "); i >= 0 {
			direct = strings.SplitN(logs[i+len("is serving on "):], "\"", 2)[0]
			break
		}
	}
	if direct == "" {
		b.Fatal("deployment never served")
	}
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	measure := func(url string, key bool) time.Duration {
		const n = 2000
		start := time.Now()
		for i := 0; i < n; i++ {
			req, _ := http.NewRequest("GET", url, nil)
			if key {
				req.Header.Set("X-Api-Key", s.Key)
			}
			resp, err := c.Do(req)
			if err != nil || resp.StatusCode != 200 {
				b.Fatalf("GET %s: %v", url, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return time.Since(start) / n
	}
	b.ResetTimer()
	var d, p time.Duration
	for i := 0; i < b.N; i++ {
		d += measure(direct+"/ok", false)
		p += measure(s.URL+"/agents/"+name+"/ok", true)
	}
	d, p = d/time.Duration(b.N), p/time.Duration(b.N)
	b.ReportMetric(float64(d.Microseconds()), "direct-µs/req")
	b.ReportMetric(float64(p.Microseconds()), "proxied-µs/req")
	b.ReportMetric(float64((p - d).Microseconds()), "overhead-µs/req")
}
