package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"slipway/server/servertest"
	"slipway/storage"
)

// BenchmarkScaleAgent grows an agent database to 1,000, 10,000, 100,000
// and 1,000,000 threads, each with one finished run of the echo graph
// (the first run for real, in-process; the rest copies of it with their
// own ids and times, written through the Store in bulk with sync off, as
// the control plane's audit benchmark loads its log), and at each step
// starts `slipway agent` on it and measures what grows with the data:
// start-up (exec to the first 200 of GET /ok, polled every millisecond),
// RSS right after, and the p50/p99 over HTTP of the calls a client makes:
// threads/search (limit 10: the default sort, a status filter, a
// metadata filter matching 0.1% of the threads, sorted by updated_at),
// threads/count, a thread, its history (limit 10) and a runs/wait on it;
// with the server's CPU per default search. It prints a table and the
// growth factor (the last step over the first). Reproduce:
//
//	go test -run '^$' -bench ScaleAgent -benchtime 1x -timeout 120m ./runtime/agent/
//
// SLIPWAY_SCALE_MAX lowers the last step (e.g. 100000); SLIPWAY_SCALE_KEEP
// keeps the data directory. A call is timed up to 200 times or for 15 s,
// whichever comes first (at least 3 times), so a slow one bounds the run.
func BenchmarkScaleAgent(b *testing.B) {
	steps := []int{1000, 10000, 100000, 1000000}
	if v := os.Getenv("SLIPWAY_SCALE_MAX"); v != "" {
		var max int
		fmt.Sscan(v, &max)
		for len(steps) > 1 && steps[len(steps)-1] > max {
			steps = steps[:len(steps)-1]
		}
	}
	bin := servertest.Binary(b)
	dir, err := os.MkdirTemp("", "slipway-agent-scale-")
	if err != nil {
		b.Fatal(err)
	}
	if os.Getenv("SLIPWAY_SCALE_KEEP") != "" {
		b.Logf("data directory kept: %s", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	type row struct {
		n        int
		load     time.Duration
		startup  time.Duration
		rssMB    float64
		cpu      time.Duration // server CPU per default search
		measured map[string][2]time.Duration
	}
	names := []string{"threads/search default", "threads/search status=idle", "threads/search metadata (0.1%)",
		"threads/search sort_by updated_at", "threads/count", "GET /threads/{id}", "history (limit 10)", "runs/wait"}
	var rows []row
	g := &scaleGrower{path: filepath.Join(dir, "agent.db")}
	for _, n := range steps {
		t0 := time.Now()
		g.grow(b, n)
		load := time.Since(t0)
		a := startScaleAgent(b, bin, dir)
		rss := a.rssMB(b)
		thread := g.sample[len(g.sample)/2]
		search := func(body string) scaleCall { return scaleCall{"POST", "/threads/search", body} }
		calls := map[string]scaleCall{
			names[0]: search(`{"limit":10}`),
			names[1]: search(`{"limit":10,"status":"idle"}`),
			names[2]: search(`{"limit":10,"metadata":{"user":"user-7"}}`),
			names[3]: search(`{"limit":10,"sort_by":"updated_at","sort_order":"desc"}`),
			names[4]: {"POST", "/threads/count", `{}`},
			names[5]: {"GET", "/threads/" + thread, ""},
			names[6]: {"GET", "/threads/" + thread + "/history?limit=10", ""},
			names[7]: {"POST", "/threads/" + thread + "/runs/wait", `{"assistant_id":"echo","input":{"messages":[{"role":"human","content":"hi"}]}}`},
		}
		got := map[string][2]time.Duration{}
		var cpu time.Duration
		for _, q := range names {
			c0 := a.cpu(b)
			lat := a.latencies(b, calls[q])
			if q == names[0] {
				cpu = (a.cpu(b) - c0) / time.Duration(lat.count)
			}
			got[q] = lat.p
		}
		a.stop()
		rows = append(rows, row{n, load, a.startup, rss, cpu, got})
	}

	var out strings.Builder
	fmt.Fprintf(&out, "\n%-40s", "threads (one finished run each)")
	for _, r := range rows {
		fmt.Fprintf(&out, " %17d", r.n)
	}
	fmt.Fprintf(&out, " %8s\n", "growth")
	last := len(rows) - 1
	line := func(name string, v func(row) float64, format string) {
		fmt.Fprintf(&out, "%-46s", name)
		for _, r := range rows {
			fmt.Fprintf(&out, " "+format, v(r))
		}
		fmt.Fprintf(&out, " %7.2fx\n", v(rows[last])/v(rows[0]))
	}
	line("database load s (not measured growth)", func(r row) float64 { return r.load.Seconds() }, "%17.1f")
	line("start-up ms", func(r row) float64 { return ms(r.startup) }, "%17.1f")
	line("RSS after start MB", func(r row) float64 { return r.rssMB }, "%17.1f")
	line("server CPU per default search ms", func(r row) float64 { return ms(r.cpu) }, "%17.1f")
	for _, q := range names {
		fmt.Fprintf(&out, "%-46s", q+" p50/p99 ms")
		for _, r := range rows {
			fmt.Fprintf(&out, " %8.2f/%-8.2f", ms(r.measured[q][0]), ms(r.measured[q][1]))
		}
		fmt.Fprintf(&out, " %7.2fx\n", float64(rows[last].measured[q][1])/float64(rows[0].measured[q][1]))
	}
	fmt.Fprintf(&out, "(growth: the last step over the first; p99 for the calls)\n")
	b.Log(out.String())
	fmt.Print(out.String())
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// scaleGrower grows the database a thread at a time from a template: a
// thread that ran the echo graph once, in-process.
type scaleGrower struct {
	path   string
	have   int
	tpl    *threadRecord
	run    *runRecord
	cps    []Checkpoint
	sample []string // every 1,000th thread's id
}

// grow adds threads until there are n. Each is the template under new
// ids and times (a millisecond apart, in id order) with metadata
// {"user": "user-<i mod 1000>"}, its run and its checkpoints, written
// through the Store 2,000 threads to a unit of work with sync off.
func (g *scaleGrower) grow(b *testing.B, n int) {
	db, err := storage.Open(g.path, time.Second, Migrations)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.NoSync = true // a bulk load; the agent reopens it with sync on
	ctx, cancel := context.WithCancel(context.Background())
	e := &Engine{DB: db, Graphs: map[string]Graph{"echo": Echo{}}, Workers: 1, Timeout: time.Minute, Log: zerolog.Nop()}
	if err := e.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() { cancel(); e.Wait() }()
	if g.tpl == nil {
		g.template(b, e)
	}
	base := g.tpl.CreatedAt
	for i := g.have; i < n; i += 2000 {
		err := e.store.Update(context.Background(), func(tx Tx) error {
			for j := i; j < min(i+2000, n); j++ {
				id := storage.NewID().String()
				if j%1000 == 0 {
					g.sample = append(g.sample, id)
				}
				at := base.Add(time.Duration(j) * time.Millisecond)
				t := *g.tpl
				t.ThreadID, t.CreatedAt, t.UpdatedAt = id, at, at.Add(500*time.Microsecond)
				t.Metadata = map[string]any{"user": fmt.Sprintf("user-%d", j%1000)}
				for k, v := range g.tpl.Metadata {
					t.Metadata[k] = v
				}
				r := *g.run
				r.RunID, r.ThreadID, r.CreatedAt, r.UpdatedAt = storage.NewID().String(), id, at, at.Add(400*time.Microsecond)
				if err := tx.PutRun(&r); err != nil {
					return err
				}
				if err := tx.IndexRun(id, r.RunID); err != nil {
					return err
				}
				var parent *CheckpointRef
				for s, cp := range g.cps {
					cp.Checkpoint = CheckpointRef{ThreadID: id, CheckpointID: storage.NewID().String()}
					cp.ParentConfig, cp.CreatedAt = parent, at.Add(time.Duration(s)*100*time.Microsecond)
					if err := tx.PutCheckpoint(id, uint64(s+1), &cp); err != nil {
						return err
					}
					parent = &cp.Checkpoint
				}
				if err := tx.PutThread(&t); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	g.have = n
	if err := db.Sync(); err != nil {
		b.Fatal(err)
	}
}

// template runs the echo graph once on a new thread (the first thread)
// and keeps its records.
func (g *scaleGrower) template(b *testing.B, e *Engine) {
	th, err := e.CreateThread("", nil, "")
	if err != nil {
		b.Fatal(err)
	}
	run, _, err := e.CreateRun(th.ThreadID, RunCreate{AssistantID: "echo",
		Input: map[string]any{"messages": []any{map[string]any{"role": "human", "content": "hi"}}}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := e.Join(context.Background(), th.ThreadID, run.RunID); err != nil {
		b.Fatal(err)
	}
	err = e.store.View(context.Background(), func(tx ReadTx) error {
		if g.tpl, err = tx.GetThread(th.ThreadID); err != nil {
			return err
		}
		if g.run, err = tx.GetRun(run.RunID); err != nil {
			return err
		}
		return tx.ForEachCheckpoint(th.ThreadID, func(_ uint64, cp *Checkpoint) error {
			g.cps = append(g.cps, *cp)
			return nil
		})
	})
	if err != nil {
		b.Fatal(err)
	}
	if g.tpl.Status != ThreadIdle || g.run.Status != RunSuccess || len(g.cps) == 0 {
		b.Fatalf("template thread: status %s, run %s, %d checkpoints", g.tpl.Status, g.run.Status, len(g.cps))
	}
	g.have, g.sample = 1, []string{th.ThreadID}
}

// scaleAgent is a `slipway agent` started on the benchmark's database.
type scaleAgent struct {
	cmd     *exec.Cmd
	url     string
	startup time.Duration
	logs    bytes.Buffer
}

// startScaleAgent starts `slipway agent` (the built-in echo graph) on dir
// and returns once GET /ok answers 200, polling every millisecond so that
// the time to it is the start-up, not the poll's period.
func startScaleAgent(b *testing.B, bin, dir string) *scaleAgent {
	addr := servertest.FreeAddr(b)
	a := &scaleAgent{url: "http://" + addr}
	a.cmd = exec.Command(bin, "agent")
	a.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "SLIPWAY_AGENT_ADDR=" + addr,
		"SLIPWAY_AGENT_DATA_DIR=" + dir, "SLIPWAY_LOG_LEVEL=warn"}
	a.cmd.Stdout, a.cmd.Stderr = &a.logs, &a.logs
	t0 := time.Now()
	if err := a.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	deadline := t0.Add(5 * time.Minute)
	for {
		resp, err := http.Get(a.url + "/ok")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			a.stop()
			b.Fatalf("slipway agent did not start: %v\n%s", err, a.logs.String())
		}
		time.Sleep(time.Millisecond)
	}
	a.startup = time.Since(t0)
	return a
}

func (a *scaleAgent) stop() {
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	_ = a.cmd.Wait()
}

func (a *scaleAgent) rssMB(b *testing.B) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", a.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err != nil {
				b.Fatal(err)
			}
			return float64(kb) / 1024
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// cpu is the agent's CPU time so far (user and system).
func (a *scaleAgent) cpu(b *testing.B) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", a.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+2:]))
	var ut, st int64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ = 100
}

type scaleCall struct{ method, path, body string }

type scaleLatency struct {
	p     [2]time.Duration // p50, p99
	count int
}

// latencies times c sequentially, 200 times or for 15 s (at least 3
// times), and returns the p50 and p99.
func (a *scaleAgent) latencies(b *testing.B, c scaleCall) scaleLatency {
	var lat []time.Duration
	start := time.Now()
	for len(lat) < 200 && (len(lat) < 3 || time.Since(start) < 15*time.Second) {
		var body io.Reader
		if c.body != "" {
			body = strings.NewReader(c.body)
		}
		req, _ := http.NewRequest(c.method, a.url+c.path, body)
		req.Header.Set("Content-Type", "application/json")
		t0 := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("%s %s: %d %s", c.method, c.path, resp.StatusCode, raw)
		}
		lat = append(lat, time.Since(t0))
		if len(lat) == 1 && strings.HasSuffix(c.path, "/search") {
			var page []json.RawMessage
			if err := json.Unmarshal(raw, &page); err != nil || len(page) == 0 || len(page) > 10 {
				b.Fatalf("%s %s: not a page of threads: %.200s", c.method, c.path, raw)
			}
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return scaleLatency{[2]time.Duration{lat[len(lat)/2], lat[len(lat)*99/100]}, len(lat)}
}
