package processtest_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"slipway/server/servertest"
	"slipway/storage"
)

// BenchmarkScaleControlPlane grows one workspace to 100, 1,000 and 10,000
// deployments (created over HTTP on the fake runtime, 8 clients) and the
// audit log to 10,000, 100,000 and 1,000,000 events (10 organizations,
// written through the audit store, as BenchmarkAuditQuery1M does) and, at
// each step, restarts `slipway serve` on the data directory and measures
// what grows with it: start-up (exec to the first 200 of GET /ok), RSS
// right after, and the p50/p99 of the lists a client makes: the first
// page, the deploy client's name lookup (name_contains with one
// deployment's name), a status filter, a deep offset and the same depth
// by cursor, and the organization's members (with a service key revoked
// per deployment, which used to leave a user behind each time), and the
// last hour of the audit log (100 events). It prints
// a table and the growth factor between the last two steps. Reproduce:
//
//	go test -run '^$' -bench ScaleControlPlane -benchtime 1x -timeout 60m ./server/processtest/
//
// SLIPWAY_SCALE_MAX lowers the last step (e.g. 1000 for a quick look);
// SLIPWAY_SCALE_KEEP keeps the data directory.
func BenchmarkScaleControlPlane(b *testing.B) {
	steps := []int{100, 1000, 10000}
	if v := os.Getenv("SLIPWAY_SCALE_MAX"); v != "" {
		var max int
		fmt.Sscan(v, &max)
		for len(steps) > 1 && steps[len(steps)-1] > max {
			steps = steps[:len(steps)-1]
		}
	}
	dir, err := os.MkdirTemp("", "slipway-scale-")
	if err != nil {
		b.Fatal(err)
	}
	master := make([]byte, 32)
	for i := range master {
		master[i] = byte(i)
	}
	if err := os.WriteFile(filepath.Join(dir, "master.key"), []byte(hex.EncodeToString(master)), 0o600); err != nil {
		b.Fatal(err)
	}
	sealer, _ := storage.NewSealer(master)
	env := map[string]string{"SLIPWAY_DATA_DIR": dir, "SLIPWAY_LOG_LEVEL": "warn", "SLIPWAY_RUNTIME": "fake",
		"DEFAULT_ORG_FEATURE_CAN_USE_AUDIT_LOGS": "true"}
	s := servertest.StartUnmanaged(b, env)
	key := s.Key
	org := uuid.MustParse(s.Do("GET", "/api/v1/orgs/current/members", nil).Map()["organization_id"].(string))
	// Audit events are loaded after the bootstrap's own, an hour ahead, in
	// time order (generateRange, audit_bench_test.go).
	base := time.Now().Add(time.Hour).Truncate(time.Hour)
	have, events := 0, 0
	type row struct {
		n        int
		startup  time.Duration
		settled  time.Duration
		rssMB    float64
		measured map[string][2]time.Duration
	}
	var rows []row
	names := []string{"first page", "name_contains (one name)", "status=READY", "offset n-20", "cursor at n-20", "members", "audit logs, last hour"}
	for _, n := range steps {
		grow(b, s, have, n)
		have = n
		s.Stop()
		// 100 audit events per deployment and organization: 1,000,000 in
		// all at 10,000 deployments.
		generateRange(b, filepath.Join(dir, "slipway.db"), sealer.Key(storage.AuditChainPurpose), org, base, events, n*10)
		events = n * 10
		lastHour := base.Add(time.Duration(events) * (30 * 24 * time.Hour / 100000))

		t0 := time.Now()
		s = startTimed(b, env)
		startup := time.Since(t0)
		s.Key = key
		rss, err := s.RSS()
		if err != nil {
			b.Fatal(err)
		}
		// A restart restores every deployment's active revision in the
		// background; the lists are measured once that is over (the
		// process idle), not while it competes with them.
		settled := waitIdle(b, s.PID(), 2*time.Minute)
		// The cursor of the page that ends 20 deployments before the
		// oldest: the last page, reached as a client walking by cursor
		// would (the cursor names the deployment before it).
		var all struct {
			Resources []struct {
				ID   string `json:"id"`
				Name string `json:"name"`
			} `json:"resources"`
			NextCursor *string `json:"next_cursor"`
		}
		r := s.Do("GET", fmt.Sprintf("/v2/deployments?limit=%d&offset=%d", 1, n-21), nil)
		mustOK(b, r)
		if err := json.Unmarshal(r.Body, &all); err != nil {
			b.Fatalf("page at n-21: %s", r.Body)
		}
		// A build without next_cursor (to measure the version before it)
		// leaves the cursor row out.
		cursor := ""
		if all.NextCursor != nil {
			cursor = *all.NextCursor
		}
		mid := s.Do("GET", fmt.Sprintf("/v2/deployments?limit=1&offset=%d", n/2), nil)
		mustOK(b, mid)
		_ = json.Unmarshal(mid.Body, &all)
		name := all.Resources[0].Name
		queries := map[string]string{
			"first page":               "/v2/deployments",
			"name_contains (one name)": "/v2/deployments?name_contains=" + name,
			"status=READY":             "/v2/deployments?status=READY",
			"offset n-20":              fmt.Sprintf("/v2/deployments?offset=%d", n-20),
			"cursor at n-20":           "/v2/deployments?cursor=" + cursor,
			"members":                  "/api/v1/orgs/current/members",
			"audit logs, last hour":    "/api/v1/audit-logs?limit=100&start_time=" + url.QueryEscape(lastHour.Add(-time.Hour).Format(time.RFC3339)) + "&end_time=" + url.QueryEscape(lastHour.Format(time.RFC3339)),
		}
		got := map[string][2]time.Duration{}
		for _, q := range names {
			if q == "cursor at n-20" && cursor == "" {
				continue
			}
			got[q] = latencies(b, s.URL+queries[q], key, 300)
		}
		rows = append(rows, row{n, startup, startup + settled, float64(rss) / (1 << 20), got})
	}
	s.Stop()
	if os.Getenv("SLIPWAY_SCALE_KEEP") != "" {
		b.Logf("data directory kept: %s", dir)
	} else {
		os.RemoveAll(dir)
	}

	var out strings.Builder
	fmt.Fprintf(&out, "\n%-38s", "deployments (audit events)")
	for _, r := range rows {
		fmt.Fprintf(&out, " %16s", fmt.Sprintf("%d (%d)", r.n, r.n*100))
	}
	fmt.Fprintf(&out, " %10s\n", "growth")
	last := len(rows) - 1
	fmt.Fprintf(&out, "%-38s", "start-up ms")
	for _, r := range rows {
		fmt.Fprintf(&out, " %16.1f", float64(r.startup.Microseconds())/1000)
	}
	fmt.Fprintf(&out, " %9.2fx\n", ratio(rows[last].startup, rows[max(last-1, 0)].startup))
	fmt.Fprintf(&out, "%-38s", "restores settled ms")
	for _, r := range rows {
		fmt.Fprintf(&out, " %16.1f", float64(r.settled.Microseconds())/1000)
	}
	fmt.Fprintf(&out, " %9.2fx\n", ratio(rows[last].settled, rows[max(last-1, 0)].settled))
	fmt.Fprintf(&out, "%-38s", "RSS after start MB")
	for _, r := range rows {
		fmt.Fprintf(&out, " %16.1f", r.rssMB)
	}
	fmt.Fprintf(&out, " %9.2fx\n", rows[last].rssMB/rows[max(last-1, 0)].rssMB)
	for _, q := range names {
		if _, ok := rows[last].measured[q]; !ok {
			continue
		}
		fmt.Fprintf(&out, "%-38s", q+" p50/p99 ms")
		for _, r := range rows {
			fmt.Fprintf(&out, " %7.2f/%-8.2f", ms(r.measured[q][0]), ms(r.measured[q][1]))
		}
		fmt.Fprintf(&out, " %9.2fx\n", ratio(rows[last].measured[q][1], rows[max(last-1, 0)].measured[q][1]))
	}
	fmt.Fprintf(&out, "(growth: the last step over the one before, p99 for the lists)\n")
	b.Log(out.String())
	fmt.Print(out.String())
}

// grow creates deployments from have to n, with 8 clients, each with a
// workspace service key created and revoked.
func grow(b *testing.B, s *servertest.Server, have, n int) {
	var wg sync.WaitGroup
	next := make(chan int)
	errc := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				r := s.Do("POST", "/v2/deployments", map[string]any{
					"name": fmt.Sprintf("scale-%06d", i), "source": "internal_docker",
					"source_config":          map[string]any{},
					"source_revision_config": map[string]any{"image_uri": "registry.local/agent:1"},
					"secrets":                []any{},
				})
				if r.Status != 201 {
					errc <- fmt.Errorf("create deployment %d: %d %s", i, r.Status, r.Body)
					return
				}
				k := s.Do("POST", "/api/v1/api-key", map[string]any{})
				if k.Status != 200 {
					errc <- fmt.Errorf("create key: %d %s", k.Status, k.Body)
					return
				}
				if d := s.Do("DELETE", "/api/v1/api-key/"+k.Map()["id"].(string), nil); d.Status != 200 {
					errc <- fmt.Errorf("revoke key: %d %s", d.Status, d.Body)
					return
				}
			}
		}()
	}
	for i := have; i < n; i++ {
		select {
		case next <- i:
		case err := <-errc:
			b.Fatal(err)
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errc:
		b.Fatal(err)
	default:
	}
}

// startTimed starts `slipway serve` on env's data directory and returns
// once GET /ok answers 200, polling every millisecond so that the time to
// it is the start-up, not the poll's period.
func startTimed(b *testing.B, env map[string]string) *servertest.Server {
	probe := exec.Command(servertest.Binary(b), "serve")
	probe.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	addr := servertest.FreeAddr(b)
	for k, v := range env {
		probe.Env = append(probe.Env, k+"="+v)
	}
	probe.Env = append(probe.Env, "SLIPWAY_ADDR="+addr)
	var logs bytes.Buffer
	probe.Stdout, probe.Stderr = &logs, &logs
	if err := probe.Start(); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/ok")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("serve did not start: %v\n%s", err, logs.String())
		}
		time.Sleep(time.Millisecond)
	}
	// Hand the data directory to a managed server for the measurements
	// (its own start is not timed).
	_ = probe.Process.Signal(os.Interrupt)
	_ = probe.Wait()
	return servertest.StartUnmanaged(b, env)
}

// waitIdle waits until process pid uses under 5% of a core over 300 ms,
// and returns how long that took.
func waitIdle(b *testing.B, pid int, within time.Duration) time.Duration {
	cpu := func() time.Duration {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			b.Fatal(err)
		}
		f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
		var ut, st int64
		fmt.Sscan(f[11], &ut)
		fmt.Sscan(f[12], &st)
		return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ = 100
	}
	t0 := time.Now()
	for time.Since(t0) < within {
		c0 := cpu()
		time.Sleep(300 * time.Millisecond)
		if cpu()-c0 < 15*time.Millisecond {
			return time.Since(t0)
		}
	}
	b.Fatalf("process %d still busy after %v", pid, within)
	return 0
}

// latencies times n sequential GETs of url and returns their p50 and p99.
func latencies(b *testing.B, url, key string, n int) [2]time.Duration {
	c := &http.Client{}
	lat := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("X-Api-Key", key)
		t0 := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("GET %s: %d", url, resp.StatusCode)
		}
		lat = append(lat, time.Since(t0))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return [2]time.Duration{lat[n/2], lat[n*99/100]}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }
