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
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
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
