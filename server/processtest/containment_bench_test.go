package processtest_test

import (
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"slipway/server/servertest"
)

// BenchmarkPatchToDeployed times, on the process runtime, a new revision
// of a deployment from its PATCH to DEPLOYED (upload, unpack, the reads of
// its project, the handover to the deployment's uid, the sandboxed agent's
// start and health check, the old agent's stop), for this tree's slipway
// and, when SLIPWAY_BENCH_BASELINE names another slipway binary (built from
// an older commit), for that one too, the rounds interleaved so that both
// see the same load. The project has its graph configuration in a
// subdirectory with an env file and a package.json beside it, so that every
// reader the containment work changed runs.
//
//	git worktree add /tmp/slipway-base 5afda92 && (cd /tmp/slipway-base && CGO_ENABLED=0 go build -o /tmp/slipway-base.bin .)
//	SLIPWAY_BENCH_BASELINE=/tmp/slipway-base.bin go test -run '^$' -bench PatchToDeployed -benchtime 5x ./server/processtest/
func BenchmarkPatchToDeployed(b *testing.B) {
	type target struct {
		name string
		s    *servertest.Server
		dep  string
		took []time.Duration
	}
	files := appFiles(b, "")
	files["cfg/langgraph.json"] = `{"graphs": {"agent": {"builtin": "echo"}, "counter": {"command": ["../bin/counter"]}}, "env": "./conf/app.env"}`
	files["cfg/conf/app.env"] = "GREETING=hello\n# a comment\nMODE=bench\n"
	files["cfg/package.json"] = `{"name": "bench"}`
	bins := []struct{ name, bin string }{{"this tree", ""}}
	if base := os.Getenv("SLIPWAY_BENCH_BASELINE"); base != "" {
		bins = append([]struct{ name, bin string }{{"baseline " + base, base}}, bins...)
	}
	var targets []*target
	for _, bn := range bins {
		env := map[string]string{"SLIPWAY_RUNTIME": "process", "SLIPWAY_LOG_LEVEL": "warn"}
		var s *servertest.Server
		if bn.bin == "" {
			s = servertest.StartUnmanaged(b, env)
		} else {
			dir, err := os.MkdirTemp("", "slipway-bench-")
			if err != nil {
				b.Fatal(err)
			}
			defer os.RemoveAll(dir)
			env["SLIPWAY_DATA_DIR"] = dir
			s = servertest.StartAs(b, env, bn.bin, nil)
		}
		defer s.Stop()
		d := s.Do("POST", "/v2/deployments", map[string]any{"name": "bench", "source": "internal_source", "source_config": map[string]any{},
			"source_revision_config": map[string]any{"graph_config_path": "cfg/langgraph.json"}, "secrets": []any{}})
		if d.Status != 201 {
			b.Fatalf("%s: create: %d %s", bn.name, d.Status, d.Body)
		}
		targets = append(targets, &target{name: bn.name, s: s, dep: d.Map()["id"].(string)})
	}
	patch := func(t *target, i int) time.Duration {
		files["cfg/conf/app.env"] += fmt.Sprintf("ROUND=%d\n", i) // a new revision, not a rebuild
		s := t.s
		start := time.Now()
		up := s.Do("POST", "/v2/deployments/"+t.dep+"/upload-url", nil).Map()
		req, _ := http.NewRequest("PUT", up["upload_url"].(string), strings.NewReader(string(sourceTarballBytes(files))))
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("%s: upload: %v", t.name, err)
		}
		resp.Body.Close()
		rev := s.Do("PATCH", "/v2/deployments/"+t.dep, map[string]any{"source_revision_config": map[string]any{
			"source_tarball_path": up["object_path"], "graph_config_path": "cfg/langgraph.json"}}).Map()["latest_revision_id"].(string)
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			st := s.Do("GET", "/v2/deployments/"+t.dep+"/revisions/"+rev, nil).Map()["status"]
			if st == "DEPLOYED" {
				break
			}
			if st == "BUILD_FAILED" || st == "DEPLOY_FAILED" || time.Now().After(deadline) {
				b.Fatalf("%s: revision %v:\n%s", t.name, st, s.Do("GET", "/v2/deployments/"+t.dep+"/revisions/"+rev+"/logs", nil).Body)
			}
		}
		return time.Since(start)
	}
	// A first revision each, not timed: the agent serves from then on and
	// every timed PATCH is a handover.
	for _, t := range targets {
		patch(t, -1)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, t := range targets {
			t.took = append(t.took, patch(t, i))
		}
	}
	b.StopTimer()
	load, _ := os.ReadFile("/proc/loadavg")
	for i, t := range targets {
		sort.Slice(t.took, func(a, c int) bool { return t.took[a] < t.took[c] })
		med := t.took[len(t.took)/2]
		b.Logf("%s: PATCH → DEPLOYED median of %d %s (all: %v)", t.name, len(t.took), med.Round(time.Millisecond), t.took)
		unit := "median-ms-this-tree"
		if i == 0 && len(targets) > 1 {
			unit = "median-ms-baseline"
		}
		b.ReportMetric(float64(med.Microseconds())/1000, unit)
	}
	b.Logf("load average: %s", strings.TrimSpace(string(load)))
}
