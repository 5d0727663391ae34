// Command standin plays `slipway agent` for the process driver's tests: it
// serves GET /ok on SLIPWAY_AGENT_ADDR, holds an exclusive lock on its data
// directory as the agent's database does, and misbehaves as its graph
// configuration asks: {"unhealthy": true} never answers 200, {"crash": true}
// exits after its first answer. As deployment code gone bad it also
// answers GET /spawn?n=N (start up to N sleeping processes, say how many
// started) and GET /hog?mb=N (a child process that allocates and touches N
// MiB; say how it ended).
package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "hog" {
		hog(os.Args[2])
	}
	if len(os.Args) < 2 || os.Args[1] != "agent" {
		os.Exit(2)
	}
	var cfg struct {
		Unhealthy bool   `json:"unhealthy"`
		Crash     bool   `json:"crash"`
		Name      string `json:"name"`
	}
	raw, err := os.ReadFile(os.Getenv("SLIPWAY_GRAPH_CONFIG"))
	if err != nil || json.Unmarshal(raw, &cfg) != nil {
		fmt.Fprintln(os.Stderr, "bad graph config")
		os.Exit(1)
	}
	lock, err := os.OpenFile(filepath.Join(os.Getenv("SLIPWAY_AGENT_DATA_DIR"), "agent.db"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		os.Exit(1)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		fmt.Fprintln(os.Stderr, "database is locked by another agent")
		os.Exit(3)
	}
	http.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		if cfg.Unhealthy {
			w.WriteHeader(500)
			return
		}
		fmt.Fprintf(w, `{"ok":true,"name":%q,"secret_seen":%t}`, cfg.Name, os.Getenv("MY_SECRET") != "")
		if cfg.Crash {
			go func() { time.Sleep(50 * time.Millisecond); os.Exit(1) }()
		}
	})
	http.HandleFunc("/spawn", spawn)
	http.HandleFunc("/hog", func(w http.ResponseWriter, r *http.Request) {
		// /proc/self/exe: the binary may lie under a tmpfs the sandbox
		// mounted over its path.
		out, err := exec.Command("/proc/self/exe", "hog", r.URL.Query().Get("mb")).CombinedOutput()
		fmt.Fprintf(w, "%s%v", out, err)
	})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	go func() { <-sig; os.Exit(0) }()
	if err := http.ListenAndServe(os.Getenv("SLIPWAY_AGENT_ADDR"), nil); err != nil {
		os.Exit(1)
	}
}

// spawn starts up to n processes that sleep for a minute, stops at the
// first that cannot start, reports how many did, and ends them all.
func spawn(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.URL.Query().Get("n"))
	var cmds []*exec.Cmd
	var firstErr error
	for range n {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			firstErr = err
			break
		}
		cmds = append(cmds, cmd)
	}
	for _, c := range cmds {
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	fmt.Fprintf(w, "started %d (%v)", len(cmds), firstErr)
}

// hog allocates mb MiB in 16 MiB steps, touching every page, and exits 0
// when it has them all.
func hog(mb string) {
	n, _ := strconv.Atoi(mb)
	var keep [][]byte
	for got := 0; got < n; got += 16 {
		b := make([]byte, 16<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		keep = append(keep, b)
	}
	fmt.Printf("allocated %d MiB\n", len(keep)*16)
	os.Exit(0)
}
