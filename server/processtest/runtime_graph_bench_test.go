package processtest_test

import (
	"encoding/json"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"slipway/server/servertest"
)

// BenchmarkDeployedGraph measures the same three-node graph (a fake chat
// model between two nodes: testdata/graphs/py-agent/bench.py and
// testdata/graphs/js-agent/src/bench.mjs) served by the Python and the
// JavaScript host, each deployed as a project through the control plane
// on each runtime and driven through its deployment URL (Slipway's proxy)
// by the load tool (runtime/agent/loadtool): sequential and
// 16-client throughput of create-run-plus-join on fresh threads, and
// run-creation latency p50/p99. BENCH_SEQ and BENCH_CONC_RUNS size the
// phases (200 and 1000).
//
//	go test -run '^$' -bench DeployedGraph -benchtime 1x -timeout 60m ./server/processtest/
func BenchmarkDeployedGraph(b *testing.B) {
	root := servertest.RepoRoot()
	tool := filepath.Join(b.TempDir(), "loadtool")
	if out, err := osexec.Command("go", "build", "-o", tool, filepath.Join(root, "runtime", "agent", "agentapi", "loadtool")).CombinedOutput(); err != nil {
		b.Fatalf("build the load tool: %v\n%s", err, out)
	}
	seq, conc := envInt("BENCH_SEQ", 200), envInt("BENCH_CONC_RUNS", 1000)
	for _, driver := range drivers {
		b.Run(driver, func(b *testing.B) {
			if driver == "docker" {
				defer cleanupInstalls(b, engine(b))
			}
			s := servertest.StartUnmanaged(b, map[string]string{"SLIPWAY_RUNTIME": driver, "SLIPWAY_LOG_LEVEL": "warn"})
			defer s.Stop()
			for _, p := range []struct{ host, dir string }{{"python", "py-agent"}, {"javascript", "js-agent"}} {
				b.Run(p.host, func(b *testing.B) {
					d := s.Do("POST", "/v2/deployments", map[string]any{"name": "bench-" + p.host, "source": "internal_source", "source_config": map[string]any{},
						"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}, "secrets": []any{}})
					if d.Status != 201 {
						b.Fatalf("create: %d %s", d.Status, d.Body)
					}
					dep := d.Map()["id"].(string)
					defer s.Do("DELETE", "/v2/deployments/"+dep, nil)
					files := projectFiles(b, filepath.Join(root, "testdata", "graphs", p.dir))
					files["langgraph.json"] = files["bench.json"]
					rev := deploySource(b, s, dep, files)
					if st := waitPyRevision(b, s, dep, rev, 20*time.Minute); st != "DEPLOYED" {
						b.Fatalf("the bench project ended %s:\n%s", st, phaseLogs(s, dep, rev))
					}
					url, _ := s.Do("GET", "/v2/deployments/"+dep, nil).Map()["url"].(string)
					var got map[string]map[string]float64
					for i := 0; i < b.N; i++ {
						out, err := osexec.Command(tool, "-url", url, "-api-key", s.Key, "-graph", "bench", "-reference", "",
							"-seq", strconv.Itoa(seq), "-conc-runs", strconv.Itoa(conc), "-concurrency", "16", "-rss-runs", "0", "-stream-runs", "0", "-json").CombinedOutput()
						if err != nil {
							b.Fatalf("load tool: %v\n%s", err, out)
						}
						b.Logf("%s on %s:\n%s", p.host, driver, out)
						lines := strings.Split(strings.TrimSpace(string(out)), "\n")
						if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
							b.Fatalf("load tool output: %v\n%s", err, out)
						}
					}
					m := got["slipway agent"]
					for _, k := range []string{"seq_runs_per_s", "conc_runs_per_s", "seq_p50_ms", "seq_p99_ms", "conc_p50_ms", "conc_p99_ms"} {
						b.ReportMetric(m[k], strings.ReplaceAll(k, "_", "-"))
					}
				})
			}
		})
	}
}

// envInt is the integer in the environment variable k, or def.
func envInt(k string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(k)); err == nil && n > 0 {
		return n
	}
	return def
}
