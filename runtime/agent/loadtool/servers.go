package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Starting the servers measured: slipway agent, and the reference server
// (JavaScript or Python) serving the same project.

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
	logName, stopGroup, err := startGroup(cmd, "loadtool-reference-*.log")
	if err != nil {
		return "", nil, nil, fmt.Errorf("start the reference server: %w", err)
	}
	pgid := cmd.Process.Pid
	stop := func() {
		stopGroup()
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
	fmt.Printf("reference: starting %s dev in %s (log %s) ...\n", filepath.Base(bin), dir, logName)
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

// startGroup starts cmd in a process group of its own, its output to a
// new temporary log named by pattern. stop ends the group (SIGTERM, then
// SIGKILL after 10 s) and removes the log.
func startGroup(cmd *exec.Cmd, pattern string) (logName string, stop func(), err error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logf, err := os.CreateTemp("", pattern)
	if err != nil {
		return "", nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		os.Remove(logf.Name())
		return "", nil, err
	}
	pgid := cmd.Process.Pid
	return logf.Name(), func() {
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
	}, nil
}
