package processtest_test

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"slipway/server/servertest"
)

// BenchmarkPythonCodeRebuild times a code-only change of a Python project
// (testdata/graphs/py-deploy, langgraph from PyPI) on each runtime: one
// deploy first installs the dependencies (not timed), then each round
// uploads the project with a changed agent.py and PATCHes it in, until the
// revision is DEPLOYED. It reports the median of that and of the build
// phase alone (the first build log line to the deploy's start).
func BenchmarkPythonCodeRebuild(b *testing.B) {
	for _, driver := range drivers {
		b.Run(driver, func(b *testing.B) {
			if driver == "docker" {
				engine(b)
				defer cleanupInstalls(b, engine(b))
			}
			s := servertest.StartUnmanaged(b, map[string]string{"SLIPWAY_RUNTIME": driver, "SLIPWAY_LOG_LEVEL": "warn"})
			defer s.Stop()
			d := s.Do("POST", "/v2/deployments", map[string]any{"name": "py-bench", "source": "internal_source", "source_config": map[string]any{},
				"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}, "secrets": []any{}})
			dep := d.Map()["id"].(string)
			defer s.Do("DELETE", "/v2/deployments/"+dep, nil)
			files := pyDeployFiles(b)
			round := func(i int) (total, build time.Duration) {
				files["py_deploy/agent.py"] += fmt.Sprintf("\n# round %d\n", i)
				start := time.Now()
				up := s.Do("POST", "/v2/deployments/"+dep+"/upload-url", nil).Map()
				req, _ := http.NewRequest("PUT", up["upload_url"].(string), strings.NewReader(string(sourceTarballBytes(files))))
				resp, err := http.DefaultClient.Do(req)
				if err != nil || resp.StatusCode != 200 {
					b.Fatalf("upload: %v", err)
				}
				resp.Body.Close()
				rev := s.Do("PATCH", "/v2/deployments/"+dep, map[string]any{"source_revision_config": map[string]any{
					"source_tarball_path": up["object_path"]}}).Map()["latest_revision_id"].(string)
				for deadline := time.Now().Add(20 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
					st := s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev, nil).Map()["status"]
					if st == "DEPLOYED" {
						break
					}
					if st == "BUILD_FAILED" || st == "DEPLOY_FAILED" || time.Now().After(deadline) {
						b.Fatalf("revision %v:\n%s", st, s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev+"/logs", nil).Body)
					}
				}
				total = time.Since(start)
				// Log lines are stored in batches: wait for the deploy's first.
				var first, deploy time.Time
				for deadline := time.Now().Add(5 * time.Second); deploy.IsZero() && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
					first = time.Time{}
					entries, _ := s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev+"/logs", nil).Map()["logs"].([]any)
					for _, e := range entries {
						m := e.(map[string]any)
						ts, _ := time.Parse(time.RFC3339Nano, m["timestamp"].(string))
						if m["phase"] == "build" && first.IsZero() {
							first = ts
						}
						if m["phase"] == "deploy" && deploy.IsZero() {
							deploy = ts
						}
					}
				}
				if first.IsZero() || deploy.IsZero() {
					b.Fatalf("revision %s: no build or deploy log lines", rev)
				}
				return total, deploy.Sub(first)
			}
			b.StopTimer()
			round(-1) // the dependencies (and on docker, the Python image)
			b.StartTimer()
			var totals, builds []time.Duration
			for i := 0; i < b.N; i++ {
				total, build := round(i)
				totals, builds = append(totals, total), append(builds, build)
			}
			b.StopTimer()
			for _, l := range [][]time.Duration{totals, builds} {
				sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
			}
			b.ReportMetric(float64(totals[len(totals)/2].Milliseconds()), "median-ms-PATCH-to-DEPLOYED")
			b.ReportMetric(float64(builds[len(builds)/2].Milliseconds()), "median-ms-build")
		})
	}
}
