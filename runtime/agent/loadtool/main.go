// Command loadtool measures an agent server over HTTP the way the
// acceptance asks: sequential create-run-plus-join on fresh threads,
// the same with concurrent clients, run-creation latency percentiles, and
// the server's RSS after many runs. It measures `slipway agent` (started
// here unless -url is given) and, in the same invocation, the reference
// JavaScript development server (@langchain/langgraph-api, run by
// `langgraphjs dev` from the reference/ directory beside this file, which
// serves an equivalent echo graph; install it there first), printing the
// ratios. -reference "" skips it; -reference-url (with -reference-pid)
// measures one already running instead.
//
// With -graph-config (a langgraph.json) slipway agent serves that
// project's graphs through its language host, and the reference serves
// the same file: -graph names the graph both run. The acceptance's
// LangGraph.js comparison is
//
//	(cd runtime/agent/hosts/js/diff && npm ci) && (cd testdata/graphs/js-agent && npm ci)
//	go build -o /tmp/slipway . && go run ./runtime/agent/loadtool -bin /tmp/slipway \
//	  -graph-config testdata/graphs/js-agent/bench.json -graph bench -reference runtime/agent/hosts/js/diff
//
// which also measures time to the first streamed event, slipway's RSS
// together with its host process, and the host's start-up to `ready`.
// During each server's concurrent phase a probe apart from the clients
// times a GET /ok and a 512-byte write with fdatasync: the floor the
// loaded machine sets under any durable request.
//
// -reference may also name a Python virtualenv with langgraph-cli[inmem]
// (bin/langgraph): the Python reference server, `langgraph dev`, serving
// the -graph-config file (BENCHMARKS.md, "Admission and bytes per run").
//
// The reference is installed with `npm install`, not `npm ci`: where the
// registry lacks some of its platform-optional packages, npm ci refuses
// the lock while npm install resolves it.
//
//	(cd runtime/agent/loadtool/reference && npm install --no-audit --no-fund)
//	go build -o /tmp/slipway . && go run ./runtime/agent/loadtool -bin /tmp/slipway
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

type latency struct{ p50, p99 time.Duration }

func percentiles(ds []time.Duration) latency {
	if len(ds) == 0 {
		return latency{}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return latency{ds[len(ds)/2], ds[len(ds)*99/100]}
}

type result struct {
	name     string
	seqRate  float64
	concRate float64
	// Run-creation latency, apart for the two phases: sequential requests
	// measure the request itself, concurrent ones add queueing behind the
	// other clients' commits.
	seqLat, concLat, allLat latency
	rssMB                   float64
	anonMB                  float64 // RssAnon: the process's own memory
	fileMB                  float64 // RssFile: pages of the memory-mapped database the kernel keeps resident
	totalRuns               int
	rssMeasure              bool
	procs                   int // processes whose memory RSS adds up
	// Time from a stream request to its first event and to its first
	// values event (the graph's input state).
	firstEvent, firstValues latency
	streamed                int
	// The machine's floor during the concurrent phase, probed apart from
	// the clients: a GET /ok (no disk, no work) and one 512-byte write
	// with fdatasync to a file beside the agent's data directory. A
	// durable run creation cannot answer faster than the two together.
	floorGet, floorSync latency
	floorN              int
}

func main() {
	bin := flag.String("bin", "", "slipway binary to start as `slipway agent` (when -url is empty)")
	url := flag.String("url", "", "an already running slipway agent")
	pid := flag.Int("pid", 0, "pid of the agent at -url, for RSS")
	refDir := flag.String("reference", "runtime/agent/loadtool/reference", "directory of the reference server to start (after `npm install` there); empty: none")
	refURL := flag.String("reference-url", "", "an already running reference server to measure instead of starting one")
	refPID := flag.Int("reference-pid", 0, "pid of the reference server, for RSS")
	apiKey := flag.String("api-key", "", "X-Api-Key sent with every request: a deployment URL through `slipway serve` (-url) needs one")
	asJSON := flag.Bool("json", false, "print the measurements as one JSON object on a line of its own after the table, for scripts")
	refGraph := flag.String("reference-graph", "", "assistant/graph id on the reference server (default: -graph)")
	graphConfig := flag.String("graph-config", "", "langgraph.json for slipway agent (SLIPWAY_GRAPH_CONFIG) and for the reference server; empty: the built-in echo graph, and the reference directory's own configuration")
	graph := flag.String("graph", "echo", "assistant/graph id slipway agent runs")
	aegraVenv := flag.String("aegra", "", "a virtualenv with aegra-api: measure Aegra too, serving -graph-config over -aegra-database")
	aegraDB := flag.String("aegra-database", "", "an empty PostgreSQL database for Aegra (postgresql://user:password@host:port/name)")
	baseline := flag.String("baseline", "", "with more than two servers, the one the others are compared with (default: the last measured)")
	var extraAgents agentSubjects
	flag.Var(&extraAgents, "agent", "another slipway agent to measure: 'NAME;KEY=VALUE;...' adds environment variables, ';roles=api,queue,...' starts a process per role (repeatable)")
	streamRuns := flag.Int("stream-runs", 200, "sequential streamed runs timed to their first events")
	seq := flag.Int("seq", 1000, "sequential runs")
	conc := flag.Int("concurrency", 16, "concurrent clients")
	concRuns := flag.Int("conc-runs", 4000, "runs in the concurrent phase")
	rssRuns := flag.Int("rss-runs", 10000, "runs before RSS is read (counting all phases)")
	refSeq := flag.Int("reference-seq", 100, "sequential runs on the reference (it is much slower)")
	refConcRuns := flag.Int("reference-conc-runs", 1000, "concurrent-phase runs on the reference")
	refRSSRuns := flag.Int("reference-rss-runs", 10000, "runs on the reference before its RSS is read")
	flag.Parse()
	if *apiKey != "" {
		client.Transport = apiKeyTransport{key: *apiKey, next: client.Transport}
	}

	if *url == "" {
		if *bin == "" {
			fmt.Fprintln(os.Stderr, "loadtool: give -bin (to start slipway agent) or -url")
			os.Exit(2)
		}
		u, p, stop, err := startAgent(*bin, *graphConfig)
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadtool:", err)
			os.Exit(1)
		}
		defer stop()
		*url, *pid = u, p
	}
	if *refGraph == "" {
		*refGraph = *graph
	}
	// Check the reference can start before spending minutes on slipway.
	if *refURL == "" && *refDir != "" {
		if _, err := os.Stat(referenceCommand(*refDir)); err != nil {
			fmt.Fprintf(os.Stderr, "loadtool: the reference server is not installed: run `npm install --no-audit --no-fund` in %s, or give a Python virtualenv with langgraph-cli[inmem] (or pass -reference '')\n", *refDir)
			os.Exit(2)
		}
	}
	// The agent's language host, if any, is its child: their memory
	// counts together.
	results := []result{measure("slipway agent", *url, *graph, func() []int { return withDescendants(*pid) }, *seq, *conc, *concRuns, *rssRuns, *streamRuns)}
	refPIDs := func() []int { return []int{*refPID} }
	if *refURL == "" && *refDir != "" {
		u, pids, stop, err := startReference(*refDir, *graphConfig)
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadtool:", err)
			os.Exit(1)
		}
		defer stop()
		*refURL, refPIDs = u, pids
	}
	if *refURL != "" {
		results = append(results, measure("reference", *refURL, *refGraph, refPIDs, *refSeq, *conc, *refConcRuns, *refRSSRuns, *streamRuns))
	}
	for _, s := range extraAgents {
		u, pids, stop, err := startSubject(*bin, *graphConfig, s)
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadtool:", err)
			os.Exit(1)
		}
		results = append(results, measure(s.name, u, *graph, pids, *seq, *conc, *concRuns, *rssRuns, *streamRuns))
		stop()
	}
	if *aegraVenv != "" {
		u, pids, stop, err := startAegra(*aegraVenv, *graphConfig, *aegraDB)
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadtool:", err)
			os.Exit(1)
		}
		results = append(results, measure("aegra", u, *refGraph, pids, *refSeq, *conc, *refConcRuns, *refRSSRuns, *streamRuns))
		stop()
	}
	// The closed loop above runs each server as fast as it goes, so the
	// concurrent phase's creation latency is that of a saturated slipway
	// against a reference serving a few dozen runs a second. At the
	// reference's own rate the two see the same load.
	var pacedLat latency
	if len(results) == 2 && results[1].concRate > 0 {
		rate := results[1].concRate
		fmt.Printf("slipway agent: %d runs from %d clients at the reference's rate, %.1f runs/s ...\n", *refConcRuns, *conc, rate)
		lat, err := concurrent(*url, *graph, *conc, *refConcRuns, time.Duration(float64(time.Second)/rate))
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadtool:", err)
			os.Exit(1)
		}
		pacedLat = percentiles(lat)
	}
	fmt.Println()
	ms := func(l latency) string {
		return fmt.Sprintf("%.2f/%.2f", float64(l.p50)/float64(time.Millisecond), float64(l.p99)/float64(time.Millisecond))
	}
	fmt.Printf("%-14s %10s %10s %13s %13s %13s %8s %16s\n", "server", "seq run/s", "conc run/s", "seq p50/p99", "conc p50/p99", "all p50/p99", "RSS MB", "(anon + file)")
	for _, r := range results {
		rss, split := "-", ""
		if r.rssMeasure {
			rss, split = fmt.Sprintf("%.1f", r.rssMB), fmt.Sprintf("(%.1f + %.1f)", r.anonMB, r.fileMB)
		}
		fmt.Printf("%-14s %10.1f %10.1f %13s %13s %13s %8s %16s\n", r.name, r.seqRate, r.concRate,
			ms(r.seqLat), ms(r.concLat), ms(r.allLat), rss, split)
	}
	fmt.Println("(run-creation latency in ms: sequential phase, concurrent phase,", *conc, "clients, and both)")
	for _, r := range results {
		if r.streamed > 0 {
			fmt.Printf("%s: first streamed event (metadata) p50/p99 %s ms, first values event p50/p99 %s ms, over %d streamed runs\n", r.name, ms(r.firstEvent), ms(r.firstValues), r.streamed)
		}
		if r.rssMeasure {
			fmt.Printf("%s: RSS %.1f MB over %d processes\n", r.name, r.rssMB, r.procs)
		}
		if r.floorN > 0 {
			fmt.Printf("%s: during the %d-client phase, GET /ok p50/p99 %s ms and a 512-byte write+fdatasync in %s p50/p99 %s ms (%d probes each)\n",
				r.name, *conc, ms(r.floorGet), os.TempDir(), ms(r.floorSync), r.floorN)
		}
	}
	if hostReady != "" {
		fmt.Printf("slipway agent: language host start-up to ready %s ms (from its log)\n", hostReady)
	}
	if *asJSON {
		printJSON(results)
	}
	if len(results) > 2 {
		if *baseline == "" {
			*baseline = results[len(results)-1].name
		}
		printRatios(results, *baseline)
	}
	if len(results) == 2 {
		s, ref := results[0], results[1]
		ratio := func(a, b time.Duration) float64 { return float64(a) / float64(b) }
		fmt.Printf("slipway agent at the reference's concurrent rate (%.1f runs/s, %d clients): creation p50/p99 %s ms\n", ref.concRate, *conc, ms(pacedLat))
		fmt.Printf("\nratios (slipway / reference): sequential %.1f×, concurrent %.1f×", s.seqRate/ref.seqRate, s.concRate/ref.concRate)
		fmt.Printf(", creation latency p50/p99: sequential %.2f×/%.2f×, concurrent %.2f×/%.2f×, all %.2f×/%.2f×, at the same rate %.2f×/%.2f×",
			ratio(s.seqLat.p50, ref.seqLat.p50), ratio(s.seqLat.p99, ref.seqLat.p99),
			ratio(s.concLat.p50, ref.concLat.p50), ratio(s.concLat.p99, ref.concLat.p99),
			ratio(s.allLat.p50, ref.allLat.p50), ratio(s.allLat.p99, ref.allLat.p99),
			ratio(pacedLat.p50, ref.concLat.p50), ratio(pacedLat.p99, ref.concLat.p99))
		if s.rssMeasure && ref.rssMeasure {
			fmt.Printf(", RSS %.2f×", s.rssMB/ref.rssMB)
		}
		if s.streamed > 0 && ref.streamed > 0 {
			fmt.Printf(", first values event p50/p99 %.2f×/%.2f×", ratio(s.firstValues.p50, ref.firstValues.p50), ratio(s.firstValues.p99, ref.firstValues.p99))
		}
		fmt.Println()
	}
}

// hostReady is the language host's start-up to `ready`, in ms, as the
// agent logs it ("javascript host ready", field startup).
var hostReady string

func startAgent(bin, graphConfig string) (string, int, func(), error) {
	return startAgentWith(bin, graphConfig, nil)
}

// startAgentWith starts `slipway agent` with env added to its environment
// (the agent measured first has none, and only its host's start-up is
// reported).
func startAgentWith(bin, graphConfig string, env []string) (string, int, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", 0, nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	dir, err := os.MkdirTemp("", "loadtool-agent-")
	if err != nil {
		return "", 0, nil, err
	}
	cmd := exec.Command(bin, "agent")
	cmd.Env = append(os.Environ(), "SLIPWAY_AGENT_ADDR="+addr, "SLIPWAY_AGENT_DATA_DIR="+dir, "SLIPWAY_LOG_LEVEL=warn")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	var readyLine chan string
	if graphConfig != "" {
		abs, err := filepath.Abs(graphConfig)
		if err != nil {
			return "", 0, nil, err
		}
		// Info level for the host's ready line; the agent logs no
		// per-request lines at info.
		cmd.Env = append(cmd.Env, "SLIPWAY_GRAPH_CONFIG="+abs, "SLIPWAY_LOG_LEVEL=info")
		cmd.Stderr = nil
		pr, err := cmd.StderrPipe()
		if err != nil {
			return "", 0, nil, err
		}
		readyLine = make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(pr)
			for sc.Scan() {
				line := sc.Text()
				var entry struct {
					Message string  `json:"message"`
					Startup float64 `json:"startup"`
					Level   string  `json:"level"`
				}
				if json.Unmarshal([]byte(line), &entry) == nil && (entry.Message == "javascript host ready" || entry.Message == "python host ready") {
					readyLine <- fmt.Sprintf("%.0f", entry.Startup)
					continue
				}
				if entry.Level != "info" {
					fmt.Fprintln(os.Stderr, line)
				}
			}
		}()
	}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return "", 0, nil, err
	}
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		os.RemoveAll(dir)
	}
	u := "http://" + addr
	for i := 0; i < 3000; i++ {
		if resp, err := http.Get(u + "/ok"); err == nil {
			resp.Body.Close()
			fmt.Printf("slipway agent: exec to first served /ok %.0f ms\n", float64(time.Since(started))/float64(time.Millisecond))
			if readyLine != nil && len(env) == 0 {
				select {
				case hostReady = <-readyLine:
				case <-time.After(time.Second):
				}
			}
			return u, cmd.Process.Pid, stop, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	return "", 0, nil, fmt.Errorf("slipway agent did not start")
}

// referenceCommand is the reference server's CLI in dir: `langgraph` of a
// Python virtualenv (langgraph-cli[inmem], the Python reference) or
// `langgraphjs` of an npm project (the JavaScript one).
func referenceCommand(dir string) string {
	py, _ := filepath.Abs(filepath.Join(dir, "bin", "langgraph"))
	if _, err := os.Stat(py); err == nil {
		return py
	}
	js, _ := filepath.Abs(filepath.Join(dir, "node_modules", ".bin", "langgraphjs"))
	return js
}

// startReference runs `langgraphjs dev` in dir on a free port, in its own
// process group (it forks the API server) so stop ends all of it; pids
// lists the group's processes for the RSS reading.
//
// With a graph configuration the reference serves that file's graphs from
// a scratch directory linking the project's files, because the dev server
// writes its state and a .gitignore beside its configuration.
func startReference(dir, graphConfig string) (string, func() []int, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	// Start from an empty database: the dev server persists its in-memory
	// state under .langgraph_api between runs.
	_ = os.RemoveAll(filepath.Join(dir, ".langgraph_api"))
	args := []string{"dev", "--port", strconv.Itoa(port), "--host", "127.0.0.1", "--no-browser"}
	bin := referenceCommand(dir)
	python := filepath.Base(bin) == "langgraph"
	if python {
		// The Python dev server watches its files and reloads by default.
		args = append(args, "--no-reload")
	}
	scratch := ""
	if graphConfig != "" {
		if scratch, err = scratchProject(graphConfig); err != nil {
			return "", nil, nil, err
		}
		args = append(args, "--config", filepath.Join(scratch, "langgraph.json"))
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	if python {
		// The Python server reads langgraph.json from its working
		// directory's point of view and writes .langgraph_api there.
		cmd.Dir = scratch
		if cmd.Dir == "" {
			return "", nil, nil, fmt.Errorf("the Python reference needs -graph-config")
		}
	}
	cmd.Env = append(os.Environ(), "LANGSMITH_TRACING=false", "LANGCHAIN_TRACING_V2=false")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logf, err := os.CreateTemp("", "loadtool-reference-*.log")
	if err != nil {
		return "", nil, nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return "", nil, nil, fmt.Errorf("start the reference server: %w", err)
	}
	pgid := cmd.Process.Pid
	stop := func() {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-done
		}
		logf.Close()
		os.Remove(logf.Name())
		if scratch != "" {
			os.RemoveAll(scratch)
		}
	}
	pids := func() []int {
		var out []int
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if g, err := syscall.Getpgid(pid); err == nil && g == pgid {
				out = append(out, pid)
			}
		}
		return out
	}
	u := fmt.Sprintf("http://127.0.0.1:%d", port)
	fmt.Printf("reference: starting %s dev in %s (log %s) ...\n", filepath.Base(bin), dir, logf.Name())
	for i := 0; i < 1200; i++ {
		if resp, err := http.Get(u + "/ok"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return u, pids, stop, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	return "", nil, nil, fmt.Errorf("the reference server did not answer /ok within 60s")
}

// scratchProject makes a directory whose langgraph.json is a copy of
// graphConfig and whose other entries link to those beside it.
func scratchProject(graphConfig string) (string, error) {
	abs, err := filepath.Abs(graphConfig)
	if err != nil {
		return "", err
	}
	scratch, err := os.MkdirTemp("", "loadtool-reference-project-")
	if err != nil {
		return "", err
	}
	entries, err := os.ReadDir(filepath.Dir(abs))
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		switch e.Name() {
		case "langgraph.json", ".langgraph_api", ".gitignore":
			continue
		}
		if err := os.Symlink(filepath.Join(filepath.Dir(abs), e.Name()), filepath.Join(scratch, e.Name())); err != nil {
			return "", err
		}
	}
	raw, err := os.ReadFile(abs)
	if err != nil {
		return "", err
	}
	return scratch, os.WriteFile(filepath.Join(scratch, "langgraph.json"), raw, 0o644)
}

// withDescendants lists pid and every process below it.
func withDescendants(pid int) []int {
	if pid <= 0 {
		return nil
	}
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		// The command name may hold spaces: fields start after its ")".
		f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
		if len(f) > 1 {
			pp, _ := strconv.Atoi(f[1])
			parent[p] = pp
		}
	}
	out := []int{pid}
	for changed := true; changed; {
		changed = false
		for p, pp := range parent {
			if slices.Contains(out, pp) && !slices.Contains(out, p) {
				out = append(out, p)
				changed = true
			}
		}
	}
	return out
}

// firstEvents streams one run on a fresh thread and times, from the
// stream request, its first event (metadata) and its first values event.
func firstEvents(base, graph string, i int) (time.Duration, time.Duration, error) {
	th, _, err := post(base+"/threads", map[string]any{})
	if err != nil {
		return 0, 0, err
	}
	tid, _ := th["thread_id"].(string)
	raw, _ := json.Marshal(map[string]any{"assistant_id": graph, "stream_mode": []string{"values"},
		"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": fmt.Sprintf("message %d", i)}}}})
	start := time.Now()
	resp, err := client.Post(base+"/threads/"+tid+"/runs/stream", "application/json", bytes.NewReader(raw))
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0, 0, fmt.Errorf("stream: %d", resp.StatusCode)
	}
	var first, values time.Duration
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		ev, ok := strings.CutPrefix(sc.Text(), "event:")
		if !ok {
			continue
		}
		if first == 0 {
			first = time.Since(start)
		}
		if strings.TrimSpace(ev) == "values" && values == 0 {
			values = time.Since(start)
		}
	}
	if values == 0 {
		return 0, 0, fmt.Errorf("stream of run %d had no values event", i)
	}
	return first, values, sc.Err()
}

// apiKeyTransport sends an API key with each request.
type apiKeyTransport struct {
	key  string
	next http.RoundTripper
}

func (t apiKeyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Api-Key", t.key)
	return t.next.RoundTrip(r)
}

// printJSON prints each server's throughput and run-creation latency (ms)
// as one JSON object keyed by server name.
func printJSON(results []result) {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	out := map[string]map[string]float64{}
	for _, r := range results {
		out[r.name] = map[string]float64{"seq_runs_per_s": r.seqRate, "conc_runs_per_s": r.concRate,
			"seq_p50_ms": ms(r.seqLat.p50), "seq_p99_ms": ms(r.seqLat.p99), "conc_p50_ms": ms(r.concLat.p50), "conc_p99_ms": ms(r.concLat.p99),
			"all_p50_ms": ms(r.allLat.p50), "all_p99_ms": ms(r.allLat.p99),
			"floor_get_p99_ms": ms(r.floorGet.p99), "floor_fdatasync_p99_ms": ms(r.floorSync.p99)}
	}
	raw, _ := json.Marshal(out)
	fmt.Printf("%s\n", raw)
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 60 * time.Second}

func post(url string, body any) (map[string]any, time.Duration, error) {
	raw, _ := json.Marshal(body)
	start := time.Now()
	resp, err := client.Post(url, "application/json", bytes.NewReader(raw))
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	d := time.Since(start)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return nil, d, fmt.Errorf("POST %s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m, d, nil
}

// oneRun creates a thread, a run on it (timed), and joins the run.
func oneRun(base, graph string, i int) (time.Duration, error) {
	th, _, err := post(base+"/threads", map[string]any{})
	if err != nil {
		return 0, err
	}
	tid, _ := th["thread_id"].(string)
	run, d, err := post(base+"/threads/"+tid+"/runs", map[string]any{"assistant_id": graph,
		"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": fmt.Sprintf("message %d", i)}}}})
	if err != nil {
		return 0, err
	}
	rid, _ := run["run_id"].(string)
	resp, err := client.Get(base + "/threads/" + tid + "/runs/" + rid + "/join")
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("join: %d", resp.StatusCode)
	}
	return d, nil
}

// concurrent runs n create-run-plus-join runs from conc clients and
// returns their creation latencies. With a pace, a run starts at most
// every pace: the clients are then an open load at a chosen rate instead
// of a closed loop that saturates the server.
func concurrent(base, graph string, conc, n int, pace time.Duration) ([]time.Duration, error) {
	var (
		mu     sync.Mutex
		lat    []time.Duration
		failed error
		wg     sync.WaitGroup
	)
	next := make(chan int)
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				d, err := oneRun(base, graph, i)
				mu.Lock()
				if err != nil && failed == nil {
					failed = err
				}
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	var tick <-chan time.Time
	if pace > 0 {
		t := time.NewTicker(pace)
		defer t.Stop()
		tick = t.C
	}
	for i := 0; i < n; i++ {
		if tick != nil {
			<-tick
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return lat, failed
}

func measure(name, base, graph string, pids func() []int, seq, conc, concRuns, rssRuns, streamRuns int) result {
	r := result{name: name}
	if streamRuns > 0 {
		fmt.Printf("%s: %d sequential streamed runs ...\n", name, streamRuns)
		var first, values []time.Duration
		for i := 0; i < streamRuns; i++ {
			f, v, err := firstEvents(base, graph, i)
			if err != nil {
				fmt.Fprintln(os.Stderr, "loadtool:", err)
				os.Exit(1)
			}
			first, values = append(first, f), append(values, v)
		}
		r.firstEvent, r.firstValues, r.streamed = percentiles(first), percentiles(values), streamRuns
	}
	var lat []time.Duration
	// A load average taken now says how busy the machine was.
	if raw, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Printf("%s: load average %s\n", name, strings.Join(strings.Fields(string(raw))[:3], " "))
	}
	fmt.Printf("%s: %d sequential runs ...\n", name, seq)
	start := time.Now()
	for i := 0; i < seq; i++ {
		d, err := oneRun(base, graph, i)
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadtool:", err)
			os.Exit(1)
		}
		lat = append(lat, d)
	}
	r.seqRate = float64(seq) / time.Since(start).Seconds()
	seqLat := append([]time.Duration(nil), lat...)
	r.seqLat = percentiles(lat)
	fmt.Printf("%s: %d runs from %d concurrent clients ...\n", name, concRuns, conc)
	start = time.Now()
	stopFloor := probeFloor(base)
	conLat, err := concurrent(base, graph, conc, concRuns, 0)
	r.floorGet, r.floorSync, r.floorN = stopFloor()
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtool:", err)
		os.Exit(1)
	}
	r.concRate = float64(concRuns) / time.Since(start).Seconds()
	r.concLat = percentiles(conLat)
	r.allLat = percentiles(append(seqLat, conLat...))
	r.totalRuns = seq + concRuns
	if fill := rssRuns - r.totalRuns; fill > 0 {
		fmt.Printf("%s: %d more runs before reading RSS ...\n", name, fill)
		if _, err := concurrent(base, graph, conc, fill, 0); err != nil {
			fmt.Fprintln(os.Stderr, "loadtool:", err)
			os.Exit(1)
		}
		r.totalRuns = rssRuns
	}
	// A server may be several processes (the reference runs its API in a
	// child of the CLI): its memory is theirs together.
	for _, pid := range pids() {
		if pid <= 0 {
			continue
		}
		r.procs++
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(raw), "\n") {
			for _, f := range []struct {
				name string
				dst  *float64
			}{{"VmRSS:", &r.rssMB}, {"RssAnon:", &r.anonMB}, {"RssFile:", &r.fileMB}} {
				if rest, ok := strings.CutPrefix(line, f.name); ok {
					var kb float64
					fmt.Sscanf(strings.TrimSpace(rest), "%f kB", &kb)
					*f.dst += kb / 1024
					r.rssMeasure = true
				}
			}
		}
	}
	return r
}

// probeFloor measures, every 20 ms until the returned function is called,
// what the machine gives any request while the clients load it: the
// latency of GET base/ok and, apart, of a 512-byte write and fdatasync
// to a preallocated file in the temporary directory (where startAgent
// puts the agent's database). The function returns their percentiles and
// the number of probes.
func probeFloor(base string) func() (latency, latency, int) {
	stop, done := make(chan struct{}), make(chan struct{})
	var get, syncs []time.Duration
	go func() {
		defer close(done)
		f, err := os.CreateTemp("", "loadtool-floor-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadtool: floor probe:", err)
			return
		}
		defer os.Remove(f.Name())
		defer f.Close()
		// Written once, so a probe's write needs no block allocation.
		const size = 1 << 20
		if _, err := f.Write(make([]byte, size)); err != nil || f.Sync() != nil {
			return
		}
		block := make([]byte, 512)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := int64(0); ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			t := time.Now()
			resp, err := client.Get(base + "/ok")
			if err != nil {
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			get = append(get, time.Since(t))
			t = time.Now()
			if _, err := f.WriteAt(block, (i*512)%size); err != nil {
				continue
			}
			if err := syscall.Fdatasync(int(f.Fd())); err != nil {
				continue
			}
			syncs = append(syncs, time.Since(t))
		}
	}()
	return func() (latency, latency, int) {
		close(stop)
		<-done
		return percentiles(get), percentiles(syncs), min(len(get), len(syncs))
	}
}
