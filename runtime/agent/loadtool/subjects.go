package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// More servers measured in the same invocation, so that every variant
// shares the machine's load of the moment (BENCHMARKS.md, "Slipway on
// PostgreSQL against Aegra").
//
//   - -agent 'NAME;K=V;K=V' starts another `slipway agent` (the same -bin
//     and -graph-config) with those environment variables added, e.g.
//     SLIPWAY_AGENT_POSTGRES_URL; with 'roles=api,queue,queue' it starts
//     one process per role (SLIPWAY_AGENT_ROLE), each with its own address
//     and data directory, and the clients talk to the first. It is measured
//     with slipway's run counts.
//   - -aegra VENV starts Aegra (`aegra-api` from PyPI, installed in that
//     virtualenv) serving the -graph-config file over the database
//     -aegra-database (an empty PostgreSQL database: Aegra migrates it),
//     measured with the reference's run counts.
//
// -baseline names the server the others are compared with.

// agentSubject is one -agent flag.
type agentSubject struct {
	name  string
	env   []string
	roles []string
}

type agentSubjects []agentSubject

func (a *agentSubjects) String() string { return fmt.Sprint(len(*a)) }

func (a *agentSubjects) Set(v string) error {
	parts := strings.Split(v, ";")
	s := agentSubject{name: strings.TrimSpace(parts[0])}
	if s.name == "" {
		return fmt.Errorf("-agent %q: the name comes first, before any ';'", v)
	}
	for _, p := range parts[1:] {
		k, val, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return fmt.Errorf("-agent %q: %q is not KEY=VALUE", s.name, p)
		}
		if k == "roles" {
			s.roles = strings.Split(val, ",")
			continue
		}
		s.env = append(s.env, p)
	}
	*a = append(*a, s)
	return nil
}

// startSubject starts the processes of s and returns the URL clients use,
// every process with its descendants (for RSS), and a stop function.
func startSubject(bin, graphConfig string, s agentSubject) (string, func() []int, func(), error) {
	roles := s.roles
	if len(roles) == 0 {
		roles = []string{""}
	}
	var (
		urls  []string
		pids  []int
		stops []func()
	)
	stopAll := func() {
		// Workers first, then the API the clients used.
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	for i, role := range roles {
		env := append([]string(nil), s.env...)
		if role != "" {
			env = append(env, "SLIPWAY_AGENT_ROLE="+role, fmt.Sprintf("SLIPWAY_AGENT_WORKER_ID=%s-%d", role, i))
		}
		u, pid, stop, err := startAgentWith(bin, graphConfig, env)
		if err != nil {
			stopAll()
			return "", nil, nil, fmt.Errorf("%s: process %d (role %q): %w", s.name, i, role, err)
		}
		urls, pids, stops = append(urls, u), append(pids, pid), append(stops, stop)
	}
	// A queue worker serves only /ok: the clients use the first process
	// that is not one.
	target := urls[0]
	for i, role := range roles {
		if role != "queue" {
			target = urls[i]
			break
		}
	}
	all := func() []int {
		var out []int
		for _, p := range pids {
			out = append(out, withDescendants(p)...)
		}
		return out
	}
	return target, all, stopAll, nil
}

// startAegra runs Aegra from the virtualenv venv on a free port, serving
// graphConfig from a scratch project (Aegra reads the graphs of a
// langgraph.json given as AEGRA_CONFIG) over database.
func startAegra(venv, graphConfig, database string) (string, func() []int, func(), error) {
	if graphConfig == "" || database == "" {
		return "", nil, nil, fmt.Errorf("-aegra needs -graph-config and -aegra-database")
	}
	python, err := filepath.Abs(filepath.Join(venv, "bin", "python"))
	if err != nil {
		return "", nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	scratch, err := scratchProject(graphConfig)
	if err != nil {
		return "", nil, nil, err
	}
	cmd := exec.Command(python, "-m", "aegra_api.main")
	cmd.Dir = scratch
	cmd.Env = append(os.Environ(), "DATABASE_URL="+database, "HOST=127.0.0.1", fmt.Sprintf("PORT=%d", port),
		"AEGRA_CONFIG=langgraph.json", "LOG_LEVEL=WARNING", "LANGSMITH_TRACING=false", "LANGCHAIN_TRACING_V2=false",
		// Its defaults (2 connections, no overflow) time out requests
		// under 16 clients: a pool per client, as a tuned install has.
		"SQLALCHEMY_POOL_SIZE=20", "SQLALCHEMY_MAX_OVERFLOW=10", "LANGGRAPH_MAX_POOL_SIZE=20")
	logName, stopGroup, err := startGroup(cmd, "loadtool-aegra-*.log")
	if err != nil {
		return "", nil, nil, fmt.Errorf("start aegra: %w", err)
	}
	stop := func() {
		stopGroup()
		os.RemoveAll(scratch)
	}
	u := fmt.Sprintf("http://127.0.0.1:%d", port)
	fmt.Printf("aegra: starting in %s (log %s) ...\n", scratch, logName)
	// Aegra has no /ok; /info answers once its database is migrated.
	for i := 0; i < 1200; i++ {
		if resp, err := http.Get(u + "/info"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return u, func() []int { return withDescendants(cmd.Process.Pid) }, stop, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	return "", nil, nil, fmt.Errorf("aegra did not answer /info within 60s")
}

// printRatios compares every server with the one named baseline.
func printRatios(results []result, baseline string) {
	var base *result
	for i := range results {
		if results[i].name == baseline {
			base = &results[i]
		}
	}
	if base == nil {
		fmt.Printf("\nno server named %q to compare with\n", baseline)
		return
	}
	ratio := func(a, b time.Duration) float64 { return float64(a) / float64(b) }
	fmt.Printf("\n%-16s %16s %20s %20s %10s   (each divided by %s's)\n", "server", "conc run/s", "conc creation p50", "conc creation p99", "RSS", baseline)
	for _, r := range results {
		rss := "-"
		if r.rssMeasure && base.rssMeasure {
			rss = fmt.Sprintf("%.2f×", r.rssMB/base.rssMB)
		}
		fmt.Printf("%-16s %15.2f× %19.2f× %19.2f× %10s\n", r.name, r.concRate/base.concRate,
			ratio(r.concLat.p50, base.concLat.p50), ratio(r.concLat.p99, base.concLat.p99), rss)
	}
}
